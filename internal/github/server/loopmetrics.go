package server

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/perfgate/perfgate/internal/store"
)

// loopCollector reports the durable loop's backlog on each scrape: webhook
// deliveries in the inbox and GitHub writes in the outbox, by status. A
// growing pending count is GitHub (or the server) falling behind; a failed
// one is work that needs a person (a redelivery, a fixed permission).
type loopCollector struct {
	st      store.Store
	inbox   *prometheus.Desc
	outbox  *prometheus.Desc
	timeout time.Duration
}

func newLoopCollector(st store.Store) *loopCollector {
	return &loopCollector{st: st, timeout: 3 * time.Second,
		inbox: prometheus.NewDesc("perfgate_webhook_inbox",
			"Webhook deliveries in the inbox by status (pending: being processed or waiting to be retried; failed: needs a redelivery; done).", []string{"status"}, nil),
		outbox: prometheus.NewDesc("perfgate_github_writes",
			"GitHub writes (check runs, comments, reactions) in the outbox by status (pending: not yet confirmed by GitHub; failed: refused for good).", []string{"status"}, nil),
	}
}

func (c *loopCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inbox
	ch <- c.outbox
}

func (c *loopCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if counts, err := c.st.CountDeliveries(ctx); err == nil {
		for _, s := range []store.DeliveryStatus{store.DeliveryPending, store.DeliveryFailed, store.DeliveryDone} {
			ch <- prometheus.MustNewConstMetric(c.inbox, prometheus.GaugeValue, float64(counts[s]), string(s))
		}
	}
	if counts, err := c.st.CountEffects(ctx); err == nil {
		for _, s := range []store.EffectStatus{store.EffectPending, store.EffectFailed, store.EffectDone} {
			ch <- prometheus.MustNewConstMetric(c.outbox, prometheus.GaugeValue, float64(counts[s]), string(s))
		}
	}
}

// registerLoopMetrics adds the collector once per registry (a server
// built twice on one metrics set, as the setup flow does, shares it).
func registerLoopMetrics(reg *prometheus.Registry, st store.Store) error {
	err := reg.Register(newLoopCollector(st))
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		return nil
	}
	return err
}
