package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// commandLines are every command and sub-calculation that parses flags,
// as its arguments start.
func commandLines() [][]string {
	var out [][]string
	for _, c := range commands() {
		switch c.name {
		case "plan":
			for _, p := range planCalculations() {
				out = append(out, []string{"plan", p.name})
			}
		case "report":
			out = append(out, []string{"report"}, []string{"report", "merge"})
		default:
			out = append(out, []string{c.name})
		}
	}
	return out
}

// helpFlag is one flag as a command's --help lists it.
type helpFlag struct{ name, kind string }

var helpFlagLine = regexp.MustCompile(`^  --([a-z0-9-]+)(?: (\S+))?$`)

// helpFlags reads the flags a command's --help lists, before its
// deprecated names.
func helpFlags(t *testing.T, line []string) []helpFlag {
	t.Helper()
	code, stdout, stderr := runCmd(context.Background(), nil, append(slices.Clone(line), "--help")...)
	if code != exitOK || stdout != "" || !strings.HasPrefix(stderr, "usage: sluice "+strings.Join(line, " ")) {
		t.Fatalf("%v --help: exit %d, stdout %q, stderr starts %.80q", line, code, stdout, stderr)
	}
	var out []helpFlag
	for l := range strings.SplitSeq(stderr, "\n") {
		if strings.HasPrefix(l, "deprecated names") {
			break
		}
		if m := helpFlagLine.FindStringSubmatch(l); m != nil {
			out = append(out, helpFlag{m[1], m[2]})
		}
	}
	return out
}

// TestEveryCommandRefusesBadFlagsInTwoLines: for every command, every
// flag that takes a number, a duration or a boolean refuses a value that
// is none of them; an unknown flag, a flag without its value and a stray
// flag syntax are refused too. Each refusal exits 2 before anything
// starts, in exactly two lines: the flag and the value with what is
// wanted, and a pointer at --help (never the whole usage, never a panic).
func TestEveryCommandRefusesBadFlagsInTwoLines(t *testing.T) {
	bad := map[string]string{"int": "x%", "uint": "x%", "float": "x%", "duration": "x%", "": "x%"}
	checked := 0
	for _, line := range commandLines() {
		cmd := strings.Join(line, " ")
		flags := helpFlags(t, line)
		type tc struct {
			args []string
			want string
		}
		cases := []tc{
			{[]string{"--no-such-flag"}, "sluice " + cmd + ": unknown flag --no-such-flag"},
			{[]string{"---x"}, "sluice " + cmd + ": bad flag syntax \"---x\""},
		}
		for _, f := range flags {
			v, typed := bad[f.kind]
			switch {
			case !typed:
				cases = append(cases, tc{[]string{"--" + f.name}, "sluice " + cmd + ": --" + f.name + " needs a value"})
			case f.kind == "":
				cases = append(cases, tc{[]string{"--" + f.name + "=" + v}, fmt.Sprintf("sluice %s: --%s %q: want true or false", cmd, f.name, v)})
			default:
				cases = append(cases, tc{[]string{"--" + f.name, v}, fmt.Sprintf("sluice %s: --%s %q: want a", cmd, f.name, v)})
			}
		}
		for _, c := range cases {
			code, stdout, stderr := runCmd(context.Background(), nil, append(slices.Clone(line), c.args...)...)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if code != exitUsage || stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], c.want) ||
				lines[1] != strings.TrimSuffix(helpHint(cmd), "\n") {
				t.Errorf("sluice %s %s: exit %d, stderr %q; want exit 2 and two lines, the first starting %q",
					cmd, strings.Join(c.args, " "), code, stderr, c.want)
			}
			checked++
		}
	}
	if checked < 250 {
		t.Errorf("checked %d refusals: the help of the commands lists fewer flags than it should", checked)
	}
}

// TestDeprecatedNamesWorkAndWarn: every old flag name still reaches its
// flag, on the command line and as its environment twin, with a one-line
// warning naming the new one; the new name works without a warning; both
// names at once are refused; --help lists the old name as deprecated.
// Each value is one the command refuses after parsing, so the refusal
// (naming the flag by its new name and showing the value) proves the
// value arrived, and nothing starts.
func TestDeprecatedNamesWorkAndWarn(t *testing.T) {
	for _, tc := range []struct {
		cmd       []string // the command and the arguments the case needs
		old, new  string
		value     string
		refusal   string // in the refusal, whichever name was used
		otherName string // a second value for the both-names case
	}{
		{[]string{"serve"}, "work-limit", "max-inflight", "-7", "--max-inflight -7: want 1 to", "8"},
		{[]string{"serve", "--quota", "name=q,rate=1/s"}, "quota-timeout", "quota-redis-timeout", "-1s", "--quota-redis-timeout -1s: must be greater than zero", "1s"},
		{[]string{"serve", "--quota", "name=q,rate=1/s"}, "quota-trusted-proxies", "trusted-proxies", "10.0.0.0/33", `--trusted-proxies: "10.0.0.0/33" is not a CIDR`, "10.0.0.0/8"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1"}, "retries", "attempts", "0", "--attempts 0: want 1", "2"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1"}, "quota-trusted-proxies", "trusted-proxies", "10.0.0.0/33", `--trusted-proxies: "10.0.0.0/33" is not a CIDR`, "10.0.0.0/8"},
		{[]string{"lab"}, "slots", "max-inflight", "0", "--max-inflight 0: want 1 to", "1"},
		{[]string{"doctor"}, "admin", "admin-addr", "ftp://127.0.0.1:1", `admin address "ftp://127.0.0.1:1": want http://host:port`, "127.0.0.1:1"},
		{[]string{"demo"}, "step", "step-duration", "0s", "--step-duration 0s: want more than 0", "1s"},
		{[]string{"demo"}, "law", "limit", "newton", `--limit "newton": want aimd, vegas or gradient2`, "aimd"},
	} {
		name := strings.Join(tc.cmd[:1], " ") + " --" + tc.old
		t.Run(name, func(t *testing.T) {
			cmd := tc.cmd[0]
			run := func(envs map[string]string, args ...string) (int, string) {
				t.Helper()
				code, _, stderr := runCmd(context.Background(), envs, append(slices.Clone(tc.cmd), args...)...)
				return code, stderr
			}
			warnFlag := fmt.Sprintf("sluice %s: warning: --%s is deprecated and will be removed in a later release; use --%s\n", cmd, tc.old, tc.new)
			oldEnv, newEnv := envName(tc.old), envName(tc.new)
			warnEnv := fmt.Sprintf("sluice %s: warning: %s is deprecated and will be removed in a later release; use %s\n", cmd, oldEnv, newEnv)

			code, out := run(nil, "--"+tc.old, tc.value)
			if code != exitUsage || !strings.HasPrefix(out, warnFlag) || !strings.Contains(out, tc.refusal) {
				t.Errorf("--%s %s: exit %d, stderr %q; want the warning, then the refusal %q", tc.old, tc.value, code, out, tc.refusal)
			}
			code, out = run(nil, "--"+tc.new, tc.value)
			if code != exitUsage || strings.Contains(out, "warning") || !strings.Contains(out, tc.refusal) {
				t.Errorf("--%s %s: exit %d, stderr %q; want the refusal %q and no warning", tc.new, tc.value, code, out, tc.refusal)
			}
			code, out = run(map[string]string{oldEnv: tc.value})
			if code != exitUsage || !strings.HasPrefix(out, warnEnv) || !strings.Contains(out, tc.refusal) {
				t.Errorf("%s=%s: exit %d, stderr %q; want the warning, then the refusal %q", oldEnv, tc.value, code, out, tc.refusal)
			}
			code, out = run(map[string]string{newEnv: tc.value})
			if code != exitUsage || strings.Contains(out, "warning") || !strings.Contains(out, tc.refusal) {
				t.Errorf("%s=%s: exit %d, stderr %q; want the refusal %q and no warning", newEnv, tc.value, code, out, tc.refusal)
			}
			// The new twin wins over the old one, which is said to be ignored.
			code, out = run(map[string]string{newEnv: tc.value, oldEnv: tc.otherName})
			if code != exitUsage || !strings.Contains(out, oldEnv+" is deprecated and ignored: "+newEnv+" is set") || !strings.Contains(out, tc.refusal) {
				t.Errorf("%s and %s: exit %d, stderr %q; want the old one ignored and the refusal %q", newEnv, oldEnv, code, out, tc.refusal)
			}
			code, out = run(nil, "--"+tc.old, tc.otherName, "--"+tc.new, tc.value)
			want := fmt.Sprintf("--%s and --%s, its deprecated name, are both given", tc.new, tc.old)
			if code != exitUsage || !strings.Contains(out, want) {
				t.Errorf("both names: exit %d, stderr %q; want %q", code, out, want)
			}
			_, _, help := runCmd(context.Background(), nil, cmd, "--help")
			_, deprecated, ok := strings.Cut(help, "deprecated names")
			if !ok || !regexp.MustCompile(`(?m)^  --`+tc.old+` +now --`+tc.new+`$`).MatchString(deprecated) {
				t.Errorf("--help does not list --%s as the deprecated name of --%s:\n%s", tc.old, tc.new, help)
			}
		})
	}
}

// TestListenAddressInUseExitsFive: a server command whose address another
// process holds says which flag named it and that it is in use, and exits
// 5, the status the docs give for it, before serving anything.
func TestListenAddressInUseExitsFive(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	rls := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(rls, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	free := "127.0.0.1:0"
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "--addr", addr, "--admin-addr", free, "--log-level", "warn"}, "addr"},
		{[]string{"serve", "--addr", free, "--admin-addr", addr, "--log-level", "warn"}, "admin-addr"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1", "--addr", addr, "--admin-addr", free}, "addr"},
		{[]string{"lab", "--addr", addr}, "addr"},
		{[]string{"ratelimit", "--config", rls, "--addr", free, "--admin-addr", addr, "--log-level", "warn"}, "admin-addr"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code, _, stderr := runCmd(ctx, nil, tc.args...)
		cancel()
		want := fmt.Sprintf("sluice %s: --%s %s: the address is in use", tc.args[0], tc.flag, addr)
		if code != exitBind || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line starting %q", tc.args, code, stderr, exitBind, want)
		}
	}
}

// TestListenAddressMessages: the other reasons a listen fails are named
// too, by the flag whose address it was.
func TestListenAddressMessages(t *testing.T) {
	addrs := []addrFlag{{"addr", "127.0.0.1:8080"}, {"admin-addr", "127.0.0.1:9090"}}
	for _, tc := range []struct {
		err  error
		code int
		want string
	}{
		{&net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090}, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)},
			exitBind, "sluice serve: --admin-addr 127.0.0.1:9090: the address is in use"},
		{&net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, Err: os.NewSyscallError("bind", syscall.EACCES)},
			exitBind, "sluice serve: --addr 127.0.0.1:8080: permission denied"},
		{&net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 8080}, Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)},
			exitBind, "sluice serve: cannot listen: the address is not one of this host's"},
		{fmt.Errorf("server: main listener: %w", &net.OpError{Op: "listen", Net: "tcp", Err: &net.DNSError{Name: "127.0.0.1", Err: "no such host"}}),
			exitUsage, "sluice serve: --addr 127.0.0.1:8080: lookup 127.0.0.1"},
		{fmt.Errorf("server: metrics: duplicate"), exitFail, "sluice serve: server: metrics: duplicate"},
	} {
		var out lockedBuffer
		code := listenFailed(env{stdout: &out, stderr: &out}, "serve", tc.err, addrs...)
		if code != tc.code || !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.err, code, out.String(), tc.code, tc.want)
		}
	}
}

// TestUnknownCommandIsTwoLines: a mistyped command gets its nearest
// match and a pointer at `sluice help`, not the whole usage.
func TestUnknownCommandIsTwoLines(t *testing.T) {
	code, _, stderr := runCmd(context.Background(), nil, "serv", "--addr", "x")
	if code != exitUsage || stderr != "sluice: unknown command \"serv\" (did you mean \"serve\"?)\nRun 'sluice help' for the commands.\n" {
		t.Errorf("exit %d, %q", code, stderr)
	}
	code, _, stderr = runCmd(context.Background(), nil, "xyzzy")
	if code != exitUsage || stderr != "sluice: unknown command \"xyzzy\"\nRun 'sluice help' for the commands.\n" {
		t.Errorf("exit %d, %q", code, stderr)
	}
	code, _, stderr = runCmd(context.Background(), nil, "help", "serv")
	if code != exitUsage || !strings.HasPrefix(stderr, "sluice: unknown command \"serv\" (did you mean \"serve\"?)\n") {
		t.Errorf("help serv: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCmd(context.Background(), nil, "help", "lab")
	if code != exitOK || !strings.HasPrefix(stderr, "usage: sluice lab") {
		t.Errorf("help lab: exit %d, %.80q; want lab's --help", code, stderr)
	}
	code, _, stderr = runCmd(context.Background(), nil, "plan", "litle")
	if code != exitUsage || !strings.HasPrefix(stderr, `sluice plan: unknown calculation "litle" (want little, drain,`) || strings.Count(stderr, "\n") != 2 {
		t.Errorf("exit %d, %q", code, stderr)
	}
}

// TestHelpAndReadmeListEveryCommand: `sluice help` lists every command of
// the table, in its order, and the README's list of commands names each
// of them and nothing else.
func TestHelpAndReadmeListEveryCommand(t *testing.T) {
	code, _, help := runCmd(context.Background(), nil, "help")
	if code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
		if !regexp.MustCompile(`(?m)^  ` + c.name + ` +` + regexp.QuoteMeta(c.summary) + `$`).MatchString(help) {
			t.Errorf("sluice help does not list %s with its summary:\n%s", c.name, help)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| \\[`cmd/sluice`\\]\\(cmd/sluice\\) \\| the CLI: (.*) \\|$").FindSubmatch(readme)
	if row == nil {
		t.Fatal("README.md has no cmd/sluice row listing the commands")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z]+)`").FindAllSubmatch(row[1], -1) {
		listed = append(listed, string(m[1]))
	}
	got, want := slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Errorf("README lists the commands %v; the command table has %v", listed, names)
	}
}

// TestDocsUseCurrentFlagNames: the README and docs never write a
// deprecated flag name (nor its SLUICE_* twin). A deprecated name that is
// also the current name of another command's flag (lab's old --slots is
// plan wait's --slots) cannot be told apart in prose and is left out.
func TestDocsUseCurrentFlagNames(t *testing.T) {
	current, old := map[string]bool{}, map[string]bool{}
	for _, line := range commandLines() {
		for _, f := range helpFlags(t, line) {
			current[f.name] = true
		}
		_, _, help := runCmd(context.Background(), nil, append(slices.Clone(line), "--help")...)
		if _, dep, ok := strings.Cut(help, "deprecated names"); ok {
			for _, m := range regexp.MustCompile(`(?m)^  --([a-z0-9-]+) +now --`).FindAllStringSubmatch(dep, -1) {
				old[m[1]] = true
			}
		}
	}
	if len(old) < 5 {
		t.Fatalf("found %d deprecated names in the commands' --help", len(old))
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	bench, _ := filepath.Glob("../../docs/bench/*.md")
	files = append(append(files, bench...), "../../README.md")
	for name := range old {
		if current[name] {
			continue
		}
		re := regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b[^-]|\b` + envName(name) + `\b`)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range strings.Split(string(b), "\n") {
				if re.MatchString(l + " ") {
					t.Errorf("%s:%d writes the deprecated --%s: %s", filepath.Base(f), i+1, name, l)
				}
			}
		}
	}
}
