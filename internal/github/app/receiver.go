package app

import (
	"net/http"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"
)

// ReceiverConfig is what the webhook endpoint needs on its own: the
// secret, the bounds on what an unauthenticated client may make it hold,
// and the events the app handles (others are answered "event ignored").
// The door process (server's door) serves the endpoint with it, holding
// neither the app's private key nor the database.
type ReceiverConfig struct {
	Secret           string        `json:"secret"`
	MaxBodyBytes     int64         `json:"max_body_bytes"`
	MaxInFlightBytes int64         `json:"max_in_flight_bytes"`
	BodyReadTimeout  time.Duration `json:"body_read_timeout"`
	InFlightWait     time.Duration `json:"in_flight_wait"`
	Events           []string      `json:"events"`
}

// ReceiverConfig is the app's endpoint settings with its events, for a
// receiver served elsewhere (NewReceiver).
func (a *App) ReceiverConfig() ReceiverConfig {
	events := make([]string, 0, len(a.handlers))
	for ev := range a.handlers {
		events = append(events, ev)
	}
	slices.Sort(events)
	return ReceiverConfig{
		Secret: a.cfg.GitHub.App.WebhookSecret, MaxBodyBytes: a.cfg.MaxBodyBytes, MaxInFlightBytes: a.cfg.MaxInFlightBytes,
		BodyReadTimeout: a.cfg.BodyReadTimeout, InFlightWait: a.cfg.InFlightWait, Events: events,
	}
}

// NewReceiver is the webhook endpoint (WebhookPath) over inbox: the
// checks, the signature and the answer exactly as the app's Handler
// gives them, one log line per request on log. accepted, when set, hears
// each delivery stored.
func NewReceiver(c ReceiverConfig, inbox Inbox, accepted func(), log zerolog.Logger) http.Handler {
	h, _ := newReceiver(c, inbox, accepted, log)
	return h
}

func newReceiver(c ReceiverConfig, inbox Inbox, accepted func(), log zerolog.Logger) (http.Handler, *receiver) {
	handles := map[string]bool{}
	for _, ev := range c.Events {
		handles[ev] = true
	}
	rc := &receiver{
		secret: []byte(c.Secret), maxBody: min(c.MaxBodyBytes, c.MaxInFlightBytes),
		budget: semaphore.NewWeighted(c.MaxInFlightBytes), budgetWait: c.InFlightWait, readTimeout: c.BodyReadTimeout,
		handles: func(ev string) bool { return handles[ev] }, inbox: inbox, accepted: accepted,
	}
	mux := http.NewServeMux()
	mux.Handle(WebhookPath, rc)
	return withRequestLog(log, mux), rc
}
