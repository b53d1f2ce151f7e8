package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// envName is the environment twin of a flag: --max-conns -> SLUICE_MAX_CONNS.
func envName(flagName string) string {
	return "SLUICE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// parseFlags parses args into fs, then fills every flag not given on the
// command line from its SLUICE_* environment twin. Command-line flags win
// over the environment, the environment wins over defaults. A bad value in
// the environment is a usage error naming the variable.
//
// Deprecated names (see deprecate) work on the command line and in the
// environment, each use warned about on one line of stderr; a flag given
// under both its names is an error.
//
// On --help it prints the command's usage and returns flag.ErrHelp. Any
// other error is printed as one line naming the flag and the value, and a
// second line pointing at --help (never the whole usage), and returned.
func parseFlags(fs *flag.FlagSet, e env, args []string) error {
	if err := parseLine(fs, args); err != nil {
		return reportParseError(fs, err)
	}
	if err := applyAliases(fs); err != nil {
		return reportParseError(fs, err)
	}
	if err := applyEnv(fs, e); err != nil {
		return reportParseError(fs, err)
	}
	return nil
}

// parseLine parses args into fs without printing anything: flag.ErrHelp
// for -h or --help, else an error worded as parseError words it.
func parseLine(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errors.New(parseError(fs, err.Error()))
}

// reportParseError prints err as parseFlags documents and returns it.
func reportParseError(fs *flag.FlagSet, err error) error {
	w := fs.Output()
	if errors.Is(err, flag.ErrHelp) {
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fmt.Fprintf(w, "usage: sluice %s [flags]\n\nflags:\n", fs.Name())
			printFlags(fs)
		}
		return err
	}
	fmt.Fprintf(w, "sluice %s: %v\n", fs.Name(), err)
	fmt.Fprint(w, helpHint(fs.Name()))
	return err
}

// helpHint is the line that follows a usage error of the command cmd
// ("serve", "plan little").
func helpHint(cmd string) string {
	return fmt.Sprintf("Run 'sluice %s --help' for its flags.\n", cmd)
}

// usageError prints err as a usage error of the command cmd (the error,
// then the line pointing at --help) and returns exitUsage.
func usageError(e env, cmd string, err error) int {
	printError(e, cmd, err)
	fmt.Fprint(e.stderr, helpHint(cmd))
	return exitUsage
}

// inputError prints err, about an input file rather than a flag, as one
// line of the command cmd and returns exitUsage.
func inputError(e env, cmd string, err error) int {
	printError(e, cmd, err)
	return exitUsage
}

// printError prints err as one line of the command cmd: "sluice doctor:
// server unreachable: ...". A package's errors start with the package's
// name ("doctor: ..."); where that is the command's, it is said once.
func printError(e env, cmd string, err error) {
	msg := err.Error()
	if first, _, _ := strings.Cut(cmd, " "); first != "" {
		msg = strings.TrimPrefix(msg, first+": ")
	}
	fmt.Fprintf(e.stderr, "sluice %s: %s\n", cmd, msg)
}

// figure writes v as a person types it: 2000000, not 2e+06 (an exponent
// only past 1e21, where plain digits stop being readable).
func figure(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1e21 {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// parseError rewords an error of the flag package (whose flags have one
// dash and whose type errors say only "parse error") as sluice's messages
// read: the flag with two dashes, the value given, and what is wanted.
func parseError(fs *flag.FlagSet, msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if near := nearestFlag(fs, name); near != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, near)
		}
		return fmt.Sprintf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", name)
	}
	if rest, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return fmt.Sprintf("bad flag syntax %q: want --name or --name=value", rest)
	}
	for _, prefix := range []string{"invalid value ", "invalid boolean value "} {
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			break
		}
		rest = strings.TrimPrefix(strings.TrimPrefix(rest[len(quoted):], " for flag -"), " for -")
		name, why, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		return fmt.Sprintf("--%s %s: %s", name, quoted, wanted(fs.Lookup(name), why))
	}
	return strings.ReplaceAll(msg, " -", " --")
}

// wanted turns the flag package's bare "parse error" and "value out of
// range" into what the flag takes; a flag.Value's own message stays.
func wanted(f *flag.Flag, why string) string {
	if f == nil || (why != "parse error" && why != "value out of range") {
		return why
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return why
	}
	var want string
	switch g.Get().(type) {
	case bool:
		return "want true or false"
	case int, int64:
		want = "a whole number"
	case uint, uint64:
		want = "a whole number, 0 or more"
	case float64:
		want = "a number"
	case time.Duration:
		return "want a duration such as 250ms, 10s or 1m30s"
	default:
		return why
	}
	if why == "value out of range" {
		return "out of range: want " + want + " of a sensible size"
	}
	return "want " + want
}

// nearestFlag returns the flag of fs whose name is closest to name (at
// most two edits away, or name with a prefix or suffix dropped), or "".
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if isAlias(f) {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name+"-") || strings.HasSuffix(f.Name, "-"+name) {
			d = min(d, 2)
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// alias is the flag.Value of a deprecated flag name. It records what the
// command line gives it; applyAliases then warns and hands each value,
// in order, to the flag under its current name, so that everything after
// parsing (fs.Visit included) sees the current name.
type alias struct {
	current string     // the flag's current name
	target  flag.Value // its Value, for IsBoolFlag and String
	values  []string
}

func (a *alias) String() string {
	if a == nil || a.target == nil {
		return ""
	}
	return a.target.String()
}

func (a *alias) Set(v string) error { a.values = append(a.values, v); return nil }

// IsBoolFlag lets a deprecated name of a boolean flag stand alone.
func (a *alias) IsBoolFlag() bool {
	b, ok := a.target.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// printFlags writes fs's flags to its output as flag.PrintDefaults does,
// but with two dashes, as sluice's messages and docs write them, and with
// the deprecated names apart, at the end.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	var old []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if isAlias(f) {
			old = append(old, f)
			return
		}
		var b strings.Builder
		b.WriteString("  --" + f.Name)
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t")
		b.WriteString(strings.ReplaceAll(usage, "\n", "\n    \t"))
		if !isZeroDefault(f) {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					fmt.Fprintf(&b, " (default %q)", f.DefValue)
				} else {
					fmt.Fprintf(&b, " (default %v)", f.DefValue)
				}
			} else {
				fmt.Fprintf(&b, " (default %v)", f.DefValue)
			}
		}
		fmt.Fprintln(w, b.String())
	})
	if len(old) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "deprecated names (they still work, with a warning, and go away in a later release):")
	for _, f := range old {
		fmt.Fprintf(w, "  --%-24s now --%s\n", f.Name, f.Value.(*alias).current)
	}
}

// isZeroDefault reports whether f's default is its type's zero value, which
// the help leaves unsaid (as flag.PrintDefaults does).
func isZeroDefault(f *flag.Flag) (zero bool) {
	defer func() {
		if recover() != nil {
			zero = f.DefValue == ""
		}
	}()
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	return !ok || f.DefValue == v.String()
}

// deprecate registers old as a deprecated name of fs's flag current (kept
// for one release): it works on the command line and as its SLUICE_*
// twin, each use prints a one-line warning, and --help lists it as
// deprecated.
func deprecate(fs *flag.FlagSet, old, current string) {
	f := fs.Lookup(current)
	if f == nil {
		panic("deprecate: no flag --" + current) // a programming error, caught by every test of the command
	}
	fs.Var(&alias{current: current, target: f.Value}, old, "deprecated: the old name of --"+current)
	fs.Lookup(old).DefValue = "" // no "(default ...)" on the old name
}

// isAlias reports whether f is a deprecated name.
func isAlias(f *flag.Flag) bool {
	_, ok := f.Value.(*alias)
	return ok
}

// aliasesOf returns the deprecated names of fs's flag name.
func aliasesOf(fs *flag.FlagSet, name string) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if a, ok := f.Value.(*alias); ok && a.current == name {
			out = append(out, f.Name)
		}
	})
	return out
}

// applyAliases warns about every deprecated name the command line used and
// passes its values to the flag's current name. A flag given under both
// names is an error: which one was meant is not for sluice to guess.
func applyAliases(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var used []*flag.Flag
	fs.Visit(func(f *flag.Flag) {
		if isAlias(f) {
			used = append(used, f)
		}
	})
	for _, f := range used {
		a := f.Value.(*alias)
		if set[a.current] {
			return fmt.Errorf("--%s and --%s, its deprecated name, are both given: give --%s only", a.current, f.Name, a.current)
		}
		fmt.Fprintf(fs.Output(), "sluice %s: warning: --%s is deprecated and will be removed in a later release; use --%s\n", fs.Name(), f.Name, a.current)
		for _, v := range a.values {
			if err := fs.Set(a.current, v); err != nil {
				return fmt.Errorf("--%s %q: %s", f.Name, v, wanted(fs.Lookup(a.current), err.Error()))
			}
		}
		a.values = nil
	}
	return nil
}

// applyEnv fills every flag not given on the command line from its
// environment twin: the current name's first, else a deprecated name's
// (warned about).
func applyEnv(fs *flag.FlagSet, e env) error {
	if e.getenv == nil {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var firstErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || firstErr != nil || isAlias(f) {
			return
		}
		name, v := envName(f.Name), e.getenv(envName(f.Name))
		olds := aliasesOf(fs, f.Name)
		slices.Sort(olds)
		for _, old := range olds {
			ov := e.getenv(envName(old))
			switch {
			case ov == "":
			case v != "":
				fmt.Fprintf(fs.Output(), "sluice %s: warning: %s is deprecated and ignored: %s is set\n", fs.Name(), envName(old), name)
			default:
				fmt.Fprintf(fs.Output(), "sluice %s: warning: %s is deprecated and will be removed in a later release; use %s\n", fs.Name(), envName(old), name)
				name, v = envName(old), ov
			}
		}
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			firstErr = fmt.Errorf("%s=%q (twin of --%s): %s", name, v, f.Name, wanted(f, err.Error()))
		}
	})
	return firstErr
}

// setFlags returns the flags given (on the command line or by their
// environment twins), by their current names.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if !isAlias(f) {
			set[f.Name] = true
		}
	})
	return set
}
