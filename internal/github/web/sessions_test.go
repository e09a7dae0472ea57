package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
)

// replicas is a load balancer in front of dashboard replicas that share
// a database: the browser sees one address, and the test picks which
// replica answers each request, so nothing sticks a browser to one.
type replicas struct {
	t    *testing.T
	gh   *githubtest.Server
	srv  *httptest.Server
	to   atomic.Pointer[web.Handler]
	skew atomic.Int64 // how far the replicas' clock is ahead, in ns
	key  []byte
}

func newReplicas(t *testing.T) *replicas {
	rs := &replicas{t: t, gh: ghtest.New(t), key: []byte("the replicas' shared link-signing key")}
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rs.to.Load().ServeHTTP(w, r) }))
	t.Cleanup(rs.srv.Close)
	rs.gh.SetPrivate(private, true)
	rs.gh.SignInAs("alice")
	rs.gh.Grant("alice", private, true)
	return rs
}

// replica starts a dashboard on st, as a replica or a restarted server
// does: nothing of another handler's memory is shared.
func (rs *replicas) replica(st store.Store) *web.Handler {
	rs.t.Helper()
	h, err := web.New(web.Options{Store: st, Signer: web.NewSigner(rs.key, time.Hour, nil), PublicURL: rs.srv.URL, Log: zerolog.Nop(),
		Now:    func() time.Time { return time.Now().Add(time.Duration(rs.skew.Load())) },
		SignIn: &web.SignIn{ClientID: githubtest.ClientID, ClientSecret: githubtest.ClientSecret, WebURL: rs.gh.URL, APIURL: rs.gh.URL + "/"}})
	if err != nil {
		rs.t.Fatal(err)
	}
	return h
}

// on sends the next requests to h.
func (rs *replicas) on(h *web.Handler) *replicas { rs.to.Store(h); return rs }

func (rs *replicas) advance(d time.Duration) { rs.skew.Add(int64(d)) }

// reads is GET of the private repository's series list, as the browser b.
func (rs *replicas) reads(b *browser) int {
	rs.t.Helper()
	return b.do("GET", rs.srv.URL+"/api/data/repos/"+private+"/series").StatusCode
}

func openStore(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A session outlives the server that started it: the store, reopened by a
// new server, still opens the page for the browser's cookie; and nothing
// of the person's token is in the database in the clear.
func TestSessionSurvivesRestart(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "perfgate.db")
	first, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	rs := newReplicas(t)
	b := newBrowser(t)
	rs.on(rs.replica(first))
	if resp := b.signIn(rs.srv.URL, "/"); resp.StatusCode != http.StatusFound || setCookie(resp, "perfgate_session") == nil {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	if code := rs.reads(b); code != 200 {
		t.Fatalf("signed in: %d", code)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// The restart: a new store handle, a new dashboard, the same browser.
	rs.on(rs.replica(openStore(t, dsn)))
	if code := rs.reads(b); code != 200 {
		t.Fatalf("after a restart: %d, want the session to hold", code)
	}

	// A server with another signing key cannot open the stored token:
	// the browser is signed out there, not served as someone unknown, and
	// the replicas with the right key keep the session.
	right := rs.replica(openStore(t, dsn))
	rs.key = []byte("another key")
	rs.on(rs.replica(openStore(t, dsn)))
	if code := rs.reads(b); code != 404 {
		t.Errorf("a server with another key: %d, want 404", code)
	}
	if code := rs.on(right).reads(b); code != 200 {
		t.Errorf("a replica with the right key, after one with the wrong key saw the session: %d, want 200", code)
	}
}

// Two replicas on one PostgreSQL database, no sticky sessions: a session
// started on one is honoured by the other, a rotation on either is seen
// by both and the id before it lasts only its grace, sign-out on one ends
// it on the other, and an expired session opens nothing anywhere.
func TestSessionAcrossReplicas(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	rs := newReplicas(t)
	a, bee := rs.replica(openStore(t, dsn)), rs.replica(openStore(t, dsn))
	b := newBrowser(t)
	rs.on(a).signInOK(b)
	if code := rs.on(bee).reads(b); code != 200 {
		t.Fatalf("replica B, session started on A: %d", code)
	}

	// Rotation on B; A honours the new id, and the old one until its
	// grace ends.
	old := b.jar.Cookies(mustURL(t, rs.srv.URL))[0].Value
	rs.advance(16 * time.Minute)
	resp := rs.on(bee).get(b)
	fresh := setCookie(resp, "perfgate_session")
	if resp.StatusCode != 200 || fresh == nil || fresh.Value == old {
		t.Fatalf("no rotation on B after 16 minutes: %d %+v", resp.StatusCode, fresh)
	}
	stale := newBrowser(t)
	stale.jar.SetCookies(mustURL(t, rs.srv.URL), []*http.Cookie{{Name: "perfgate_session", Value: old}})
	if code := rs.on(a).reads(stale); code != 200 {
		t.Errorf("replica A, the id just rotated away on B: %d, want 200 within the grace", code)
	}
	if code := rs.on(a).reads(b); code != 200 {
		t.Errorf("replica A, the new id from B: %d", code)
	}
	rs.advance(time.Minute)
	for name, h := range map[string]*web.Handler{"A": a, "B": bee} {
		if code := rs.on(h).reads(stale); code != 404 {
			t.Errorf("replica %s, the rotated-away id after its grace: %d, want 404", name, code)
		}
	}

	// Sign-out on A ends the session on B.
	if code := rs.on(a).post(b, "/logout"); code != http.StatusSeeOther {
		t.Fatalf("logout on A: %d", code)
	}
	cur := newBrowser(t)
	cur.jar.SetCookies(mustURL(t, rs.srv.URL), []*http.Cookie{{Name: "perfgate_session", Value: fresh.Value}})
	if code := rs.on(bee).reads(cur); code != 404 {
		t.Errorf("replica B after sign-out on A: %d, want 404", code)
	}

	// Expiry, seen by both.
	b2 := newBrowser(t)
	rs.on(bee).signInOK(b2)
	rs.advance(web.SessionTTL + time.Second)
	for name, h := range map[string]*web.Handler{"A": a, "B": bee} {
		// The browser would have dropped the cookie (Max-Age); a copy of it
		// must not work either.
		if code := rs.on(h).reads(b2); code != 404 {
			t.Errorf("replica %s, a session past its %s: %d, want 404", name, web.SessionTTL, code)
		}
	}
}

func (rs *replicas) signInOK(b *browser) {
	rs.t.Helper()
	if resp := b.signIn(rs.srv.URL, "/"); resp.StatusCode != http.StatusFound || setCookie(resp, "perfgate_session") == nil {
		rs.t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	if code := rs.reads(b); code != 200 {
		rs.t.Fatalf("just signed in: %d", code)
	}
}

func (rs *replicas) get(b *browser) *http.Response {
	rs.t.Helper()
	return b.do("GET", rs.srv.URL+"/api/data/repos/"+private+"/series")
}

func (rs *replicas) post(b *browser, path string) int {
	rs.t.Helper()
	return b.do("POST", rs.srv.URL+path).StatusCode
}
