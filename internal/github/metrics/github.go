package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// GitHubTransport counts every GitHub API request by method and status,
// keeps the latest rate-limit remaining per resource, and counts check runs
// concluded (a 2xx answer to a check-runs create or update that set a
// conclusion). It has the shape of a go-githubapp client middleware.
//
// It may wrap both an installation client and, inside it, the transport
// that fetches the installation's tokens (ghinstallation sends the API
// requests through that transport too): a request the outer layer
// counted is marked in its context and passes the inner one uncounted,
// while the token POST the installation transport makes on its way is
// counted there.
func (m *Metrics) GitHubTransport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		id := req.Method + " " + req.URL.String()
		if counted, _ := req.Context().Value(countedKey{}).(string); counted == id {
			return next.RoundTrip(req)
		}
		req = req.WithContext(context.WithValue(req.Context(), countedKey{}, id))
		check := checkRunBody(req)
		resp, err := next.RoundTrip(req)
		if err != nil {
			m.apiCalls.WithLabelValues(req.Method, "error").Inc()
			return resp, err
		}
		m.apiCalls.WithLabelValues(req.Method, strconv.Itoa(resp.StatusCode)).Inc()
		if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
			if n, perr := strconv.ParseFloat(v, 64); perr == nil {
				res := resp.Header.Get("X-RateLimit-Resource")
				if res == "" {
					res = "core"
				}
				m.rateLimit.WithLabelValues(res).Set(n)
			}
		}
		if check != nil && check.Conclusion != "" && resp.StatusCode < 300 {
			m.conclusions.WithLabelValues(check.Name, check.Conclusion).Inc()
		}
		return resp, nil
	})
}

// countedKey marks a request's context with the request GitHubTransport
// counted ("METHOD URL").
type countedKey struct{}

type checkRunFields struct {
	Name       string `json:"name"`
	Conclusion string `json:"conclusion"`
}

// checkRunBody reads the name and conclusion of a check-runs create or
// update without consuming the request body.
func checkRunBody(req *http.Request) *checkRunFields {
	p := req.URL.Path
	isCreate := req.Method == http.MethodPost && strings.HasSuffix(p, "/check-runs")
	isUpdate := req.Method == http.MethodPatch && strings.Contains(p, "/check-runs/")
	if (!isCreate && !isUpdate) || req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, 1<<20))
	if err != nil {
		return nil
	}
	var f checkRunFields
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&f) != nil {
		return nil
	}
	return &f
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
