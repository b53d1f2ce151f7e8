package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/sluicehq/sluice/limit"
	"github.com/sluicehq/sluice/promsluice"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/server"
)

// proxyReloader answers SIGHUP in `sluice proxy`: it re-reads --config
// (routes, and upstreams if the file names them) and the TLS files, and
// applies what changed without dropping a connection (proxy.Reload). A
// file that does not parse, or asks what the running proxy cannot do in
// place, is refused with a log line and the running configuration stays.
// The flags are read once, at start.
type proxyReloader struct {
	opts    *proxyOptions
	quotas  *quotaOptions
	p       *proxy.Proxy
	srv     *server.Server
	metrics *promsluice.Metrics
	logger  *slog.Logger
}

func (r *proxyReloader) reload() {
	if r.opts.config == "" {
		r.logger.Info("SIGHUP: no --config to re-read")
	} else if err := r.reloadRules(); err != nil {
		r.logger.Error("SIGHUP: reload refused; the running routes and upstreams stay", "config", r.opts.config, "err", err)
	}
	reloadTLS(r.srv, r.logger, "proxy")
}

func (r *proxyReloader) reloadRules() error {
	file, err := r.opts.readConfig()
	if err != nil {
		return err
	}
	if len(file.Upstreams) == 0 && len(r.opts.upstreams) == 0 {
		return fmt.Errorf("--config %s names no \"upstreams\" and no --upstream was given", r.opts.config)
	}
	if err := checkQuotaNames(r.quotas.quotas, file.Routes); err != nil {
		return err
	}
	before := r.p.Adaptives()
	sum, err := r.p.Reload(file.Routes, file.Upstreams)
	if err != nil {
		if errors.Is(err, proxy.ErrRestartNeeded) {
			return fmt.Errorf("%v (the proxy keeps running with the old rules)", err)
		}
		return err
	}
	if err := r.srv.SetGates(r.p.Gates()); err != nil {
		return err // cannot happen: the proxy's gates are never nil
	}
	if err := r.syncLimits(before, r.p.Adaptives()); err != nil {
		return err // cannot happen: adaptive limits are never nil
	}
	r.logger.Info("SIGHUP: reloaded", "config", r.opts.config, "routes", sum.Routes,
		"added", sum.Added, "removed", sum.Removed, "resized", sum.Resized, "requeued", sum.Requeued,
		"new_quotas", sum.NewQuotas, "upstreams", sum.Upstreams,
		"upstreams_added", sum.UpstreamsAdded, "upstreams_removed", sum.UpstreamsRemoved)
	return nil
}

// syncLimits exports the adaptive limits a reload added and stops
// exporting those it retired.
func (r *proxyReloader) syncLimits(before, after []*limit.Adaptive) error {
	for _, a := range before {
		if !slices.Contains(after, a) {
			if err := r.metrics.Remove(a); err != nil {
				return err
			}
		}
	}
	for _, a := range after {
		if err := r.metrics.Add(a); err != nil { // a no-op for the kept ones
			return err
		}
	}
	return nil
}
