package metrics

import (
	"net/http"
)

// Webhook counts deliveries to next (the webhook endpoint) by event and by
// the outcome its status code means.
func (m *Metrics) Webhook(next http.Handler) http.Handler {
	return Answers(next, m.DeliveryAnswered)
}

// Answers hands answered each webhook answer's event and status after
// next has written it (the door process tells them to the server this
// way).
func Answers(next http.Handler, answered func(event string, status int)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		answered(r.Header.Get("X-GitHub-Event"), rec.status)
	})
}

// DeliveryAnswered counts a webhook delivery answered with status: the
// door process, which answers them away from this one, reports each.
func (m *Metrics) DeliveryAnswered(event string, status int) {
	m.deliveries.WithLabelValues(eventLabel(event), deliveryOutcome(status)).Inc()
}

func deliveryOutcome(status int) string {
	switch {
	case status < 300:
		return "accepted"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "bad_signature"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return "no_capacity"
	case status < 500:
		return "invalid"
	default:
		return "error"
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
