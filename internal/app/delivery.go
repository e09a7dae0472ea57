package app

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"
)

// verifyDelivery enforces the body limit (413) and the HMAC signature (401)
// before go-githubapp sees the request. go-githubapp checks the signature
// too, but answers 400 for every problem; GitHub's delivery log and
// operators read a 401 as "the secrets differ", which is what it means.
func verifyDelivery(secret string, maxBytes int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log := zerolog.Ctx(r.Context())
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "webhook deliveries are POSTs", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				log.Warn().Int64("limit_bytes", maxBytes).Msg("webhook body too large")
				http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		sig := r.Header.Get(github.SHA256SignatureHeader)
		if sig == "" {
			log.Warn().Msg("webhook delivery without X-Hub-Signature-256")
			http.Error(w, "missing X-Hub-Signature-256: configure the webhook secret on the GitHub App", http.StatusUnauthorized)
			return
		}
		if err := github.ValidateSignature(sig, body, []byte(secret)); err != nil {
			log.Warn().Err(err).Msg("webhook signature mismatch")
			http.Error(w, "X-Hub-Signature-256 does not match: the webhook secret differs from perfgate's", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}
