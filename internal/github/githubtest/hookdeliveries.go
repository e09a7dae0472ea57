package githubtest

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HookDelivery is one attempt GitHub made to deliver a webhook to the app,
// as GET /app/hook/deliveries lists it.
type HookDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	StatusCode  int // 0: GitHub could not connect
	Event       string
	Action      string
	Redelivery  bool
}

// SetHookDeliveries sets the app's webhook delivery log (newest first, as
// GitHub lists it).
func (s *Server) SetHookDeliveries(ds []HookDelivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hookDeliveries = append([]HookDelivery(nil), ds...)
}

// Redelivered lists the delivery IDs POST …/attempts asked GitHub to send
// again, in order.
func (s *Server) Redelivered() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.redelivered...)
}

func (s *Server) hookDeliveryRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/hook/deliveries", s.appJWT(s.listHookDeliveries))
	mux.HandleFunc("POST /app/hook/deliveries/{id}/attempts", s.appJWT(s.redeliver))
}

// appJWT demands the app's own JWT, as the /app endpoints do.
func (s *Server) appJWT(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "Bearer ") || verifyAppJWT(strings.TrimPrefix(auth, "Bearer "), &s.Key.PublicKey, AppID, time.Now()) != nil {
			writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
			return
		}
		h(w, r)
	}
}

// listHookDeliveries pages with per_page and an opaque cursor (the index
// to start at), in a Link header as GitHub does.
func (s *Server) listHookDeliveries(w http.ResponseWriter, r *http.Request) {
	perPage := 30
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	s.mu.Lock()
	all := s.hookDeliveries
	s.mu.Unlock()
	start = min(max(start, 0), len(all))
	end := min(start+perPage, len(all))
	out := make([]map[string]any, 0, end-start)
	for _, d := range all[start:end] {
		status := "OK"
		if d.StatusCode < 200 || d.StatusCode > 299 {
			status = "failed"
		}
		out = append(out, map[string]any{"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.UTC().Format(time.RFC3339),
			"redelivery": d.Redelivery, "duration": 0.1, "status": status, "status_code": d.StatusCode, "event": d.Event, "action": d.Action,
			"installation_id": InstallationID})
	}
	if end < len(all) {
		w.Header().Set("Link", "<"+s.URL+"/app/hook/deliveries?per_page="+strconv.Itoa(perPage)+"&cursor="+strconv.Itoa(end)+">; rel=\"next\"")
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) redeliver(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.hookDeliveries {
		if d.ID == id {
			s.redelivered = append(s.redelivered, id)
			writeJSON(w, http.StatusAccepted, map[string]any{})
			return
		}
	}
	writeError(w, http.StatusNotFound, "Not Found")
}
