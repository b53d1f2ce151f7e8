package ratelimit

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sluicehq/sluice/quota"
)

// State is the Service's condition, for the admin listener's /state.
type State struct {
	Files   []string    `json:"files"`
	Loaded  time.Time   `json:"loaded"`
	Reloads ReloadState `json:"reloads"`
	// Mode is local (counters in this process), fleet (Redis) or
	// fallback (some rule is deciding without Redis now).
	Mode          string        `json:"mode"`
	Domains       []DomainState `json:"domains"`
	UnknownDomain uint64        `json:"unknown_domain_requests"`
	Invalid       uint64        `json:"invalid_requests"`
}

// ReloadState counts configuration loads.
type ReloadState struct {
	OK        uint64 `json:"ok"`
	Failed    uint64 `json:"failed"`
	LastError string `json:"last_error,omitempty"`
}

// DomainState is one domain's rules and counters.
type DomainState struct {
	Domain      string            `json:"domain"`
	OK          uint64            `json:"ok"`
	OverLimit   uint64            `json:"over_limit"`
	Descriptors map[string]uint64 `json:"descriptors"`
	Rules       []RuleState       `json:"rules"`
}

// RuleState is one rule and its counters.
type RuleState struct {
	Path            string      `json:"path"`
	Name            string      `json:"name,omitempty"`
	RequestsPerUnit uint32      `json:"requests_per_unit"`
	Unit            string      `json:"unit"`
	Unlimited       bool        `json:"unlimited,omitempty"`
	Shadow          bool        `json:"shadow_mode,omitempty"`
	Algorithm       string      `json:"algorithm,omitempty"`
	Fail            string      `json:"fail,omitempty"`
	Burst           int         `json:"burst,omitempty"`
	Stats           quota.Stats `json:"counters"`
	Fleet           *FleetState `json:"fleet,omitempty"`
}

// State returns a snapshot for /state.
func (s *Service) State() State {
	l := s.cur.Load()
	s.reloads.mu.Lock()
	st := State{
		Files: l.table.Files, Loaded: l.at,
		Reloads:       ReloadState{OK: s.reloads.ok, Failed: s.reloads.fail, LastError: s.reloads.lastError},
		UnknownDomain: s.unknownDomain.Load(), Invalid: s.invalid.Load(),
		Mode: quota.ModeLocal,
	}
	s.reloads.mu.Unlock()
	if s.redisOn {
		st.Mode = quota.ModeFleet
	}
	for _, sum := range s.domainSums(l) {
		if sum.Mode == quota.ModeFallback {
			st.Mode = quota.ModeFallback
		}
	}
	byDomain := map[string]*DomainState{}
	for _, d := range l.table.Domains() {
		ds := l.domains[d]
		dst := &DomainState{Domain: d, OK: ds.ok.Load(), OverLimit: ds.over.Load(), Descriptors: map[string]uint64{}}
		for r := range numResults {
			dst.Descriptors[resultNames[r]] = ds.descriptors[r].Load()
		}
		byDomain[d] = dst
	}
	for _, r := range l.table.rules {
		rs := RuleState{
			Path: r.Path, Name: r.Name, RequestsPerUnit: r.RequestsPerUnit, Unit: r.Unit.String(),
			Unlimited: r.Unlimited, Shadow: r.ShadowMode, Burst: r.Burst,
		}
		if lim := l.limiters[r]; lim != nil {
			alg, fail := s.resolve(r)
			rs.Algorithm, rs.Fail = alg.String(), fail.String()
			rs.Stats = lim.c.stats()
			rs.Stats.Quota = lim.name
			rs.Fleet = lim.c.fleet()
		}
		byDomain[r.Domain].Rules = append(byDomain[r.Domain].Rules, rs)
	}
	for _, d := range l.table.Domains() {
		st.Domains = append(st.Domains, *byDomain[d])
	}
	return st
}

// Watch reloads the configuration from paths when reload receives a
// value (SIGHUP) and, with files, whenever one of them changes (a write,
// a rename onto it, a Kubernetes ConfigMap's symlink swap), until ctx
// ends. A file
// that does not load is refused: the table in use stays, the error is
// logged and counted. Files whose contents did not change are not
// reloaded. It returns when ctx ends, or an error if the files cannot be
// watched at all.
func (s *Service) Watch(ctx context.Context, paths []string, merge, files bool, reload <-chan struct{}) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	dirs := map[string]bool{}
	for _, p := range paths {
		if !files {
			break
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		dir := abs
		if st, err := os.Stat(abs); err == nil && !st.IsDir() {
			dir = filepath.Dir(abs)
		}
		if !dirs[dir] {
			dirs[dir] = true
			if err := w.Add(dir); err != nil {
				return err
			}
		}
	}
	last := digest(paths)
	// Editors and ConfigMap updates change a file in several steps;
	// reload once they have settled.
	const settle = 100 * time.Millisecond
	var timer *time.Timer
	var fire <-chan time.Time
	load := func(force bool) {
		d := digest(paths)
		if !force && d == last {
			return
		}
		t, err := Load(paths, merge)
		if err != nil {
			s.Reject(err)
			last = d
			return
		}
		if err := s.SetTable(t); err != nil {
			s.Reject(err)
		}
		last = d
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-reload:
			if s.cfg.Logger != nil {
				s.cfg.Logger.Info("reloading the rate limit configuration (signal)")
			}
			load(true)
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("ratelimit: file watcher closed")
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(settle)
			} else {
				timer.Reset(settle)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			load(false)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("ratelimit: file watcher closed")
			}
			if s.cfg.Logger != nil {
				s.cfg.Logger.Warn("watching the rate limit configuration", "err", err)
			}
		}
	}
}

// digest is a hash of every configuration file's name and contents; an
// unreadable path hashes as its error.
func digest(paths []string) [32]byte {
	h := sha256.New()
	for _, p := range paths {
		files := []string{p}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			files = files[:0]
			ents, _ := os.ReadDir(p)
			for _, e := range ents {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
		for _, f := range files {
			h.Write([]byte(f))
			b, err := os.ReadFile(f)
			if err != nil {
				h.Write([]byte(err.Error()))
			}
			h.Write(b)
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
