package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"
)

// receiver takes webhook deliveries off the wire. Everything an
// unauthenticated client controls is bounded before its body is trusted:
// the method, headers and signature format are checked before a byte of
// the body is read; the declared length against the per-delivery limit;
// the body is read under a deadline, into memory reserved from a budget
// shared by all connections, through the HMAC that verifies it. Only a
// verified delivery is stored in the inbox, and only a stored one is
// answered 2xx.
type receiver struct {
	secret      []byte
	maxBody     int64
	budget      *semaphore.Weighted
	budgetWait  time.Duration
	readTimeout time.Duration
	handles     func(event string) bool
	inbox       Inbox
	accepted    func()
}

// maxHeaderValue bounds the event name and delivery GUID (a GUID is 36).
const maxHeaderValue = 100

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	log := zerolog.Ctx(r.Context())
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "webhook deliveries are POSTs", http.StatusMethodNotAllowed)
		return
	}
	event, id := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
	if event == "" || id == "" || len(event) > maxHeaderValue || len(id) > maxHeaderValue {
		http.Error(w, "X-GitHub-Event and X-GitHub-Delivery are required (up to 100 characters each)", http.StatusBadRequest)
		return
	}
	sig := r.Header.Get("X-Hub-Signature-256")
	if sig == "" {
		log.Warn().Msg("webhook delivery without X-Hub-Signature-256")
		http.Error(w, "missing X-Hub-Signature-256: configure the webhook secret on the GitHub App", http.StatusUnauthorized)
		return
	}
	want, ok := parseSignature(sig)
	if !ok {
		log.Warn().Msg("malformed X-Hub-Signature-256")
		http.Error(w, "X-Hub-Signature-256 is not sha256=<64 hex digits>", http.StatusUnauthorized)
		return
	}
	if r.ContentLength < 0 {
		http.Error(w, "a webhook delivery needs a Content-Length", http.StatusLengthRequired)
		return
	}
	if r.ContentLength > rc.maxBody {
		log.Warn().Int64("length", r.ContentLength).Int64("limit_bytes", rc.maxBody).Msg("webhook body too large")
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
		return
	}
	// A body that trickles in is cut off; the server's own read timeout
	// bounds the whole request too.
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(rc.readTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		log.Debug().Err(err).Msg("set webhook read deadline")
	}
	n := r.ContentLength
	wait, cancel := context.WithTimeout(r.Context(), rc.budgetWait)
	err := rc.budget.Acquire(wait, max(n, 1))
	cancel()
	if err != nil {
		log.Warn().Int64("length", n).Msg("webhook bodies in flight at the memory limit: refused")
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many webhook bodies in flight; redeliver shortly", http.StatusServiceUnavailable)
		return
	}
	defer rc.budget.Release(max(n, 1))

	mac := hmac.New(sha256.New, rc.secret)
	body := make([]byte, n)
	if _, err := io.ReadFull(io.TeeReader(r.Body, mac), body); err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !hmac.Equal(mac.Sum(nil), want) {
		log.Warn().Msg("webhook signature mismatch")
		http.Error(w, "X-Hub-Signature-256 does not match: the webhook secret differs from perfgate's", http.StatusUnauthorized)
		return
	}
	if !rc.handles(event) {
		log.Debug().Str("event", event).Msg("webhook event perfgate does not handle")
		fmt.Fprintln(w, "event ignored")
		return
	}
	dup, err := rc.inbox.Accept(r.Context(), id, event, body)
	if err != nil {
		log.Error().Err(err).Msg("store webhook delivery")
		http.Error(w, "perfgate could not store the delivery; redeliver it", http.StatusServiceUnavailable)
		return
	}
	if dup {
		log.Info().Msg("duplicate delivery ignored: it was already processed")
		fmt.Fprintln(w, "duplicate delivery: already processed")
		return
	}
	if rc.accepted != nil {
		rc.accepted()
	}
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintln(w, "delivery stored")
}

// parseSignature decodes "sha256=<hex>".
func parseSignature(h string) ([]byte, bool) {
	hexSum, ok := strings.CutPrefix(h, "sha256=")
	if !ok || len(hexSum) != 2*sha256.Size {
		return nil, false
	}
	sum, err := hex.DecodeString(hexSum)
	return sum, err == nil
}

// withRequestLog puts log, with the event and delivery fields, in each
// request's context and logs one line per request.
func withRequestLog(log zerolog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rlog := log.With().Str("event", r.Header.Get("X-GitHub-Event")).Str("delivery", r.Header.Get("X-GitHub-Delivery")).Logger()
		next.ServeHTTP(rec, r.WithContext(rlog.WithContext(r.Context())))
		rlog.Info().
			Str("method", r.Method).Str("path", r.URL.Path).Str("length", strconv.FormatInt(r.ContentLength, 10)).
			Int("status", rec.status).Dur("elapsed", time.Since(start)).
			Msg("http request")
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
