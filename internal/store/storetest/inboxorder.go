package storetest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// The deliveries of one pull request are claimed one at a time in the
// order their events happened, whatever order they arrived in: a later
// event waits while an earlier one is held or waiting out a retry, an
// earlier one that arrives late waits while a later one is held, a
// delivery that failed for good no longer blocks, and other pull requests
// (and deliveries with no subject) are not held up.
func testInboxOrder(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t) // a second replica
	t0 := e.clock.Now().Add(-time.Hour)
	pr17 := func(min int) store.DeliveryOrder {
		return store.DeliveryOrder{Subject: "acme/llm#17", At: t0.Add(time.Duration(min) * time.Minute)}
	}
	accept := func(id string, o store.DeliveryOrder) {
		t.Helper()
		if _, err := e.st.AcceptDelivery(e.ctx, id, "pull_request", []byte(`{}`), o); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Millisecond)
	}
	ids := func(ds []store.Delivery) map[string]store.Delivery {
		m := map[string]store.Delivery{}
		for _, d := range ds {
			m[d.ID] = d
		}
		return m
	}
	// "closed" (minute 2) arrives before "opened" (minute 1), "synchronize"
	// (minute 3) after both; PR 18's and an installation event have no
	// bearing on PR 17.
	accept("closed", pr17(2))
	accept("opened", pr17(1))
	accept("sync", pr17(3))
	accept("pr18", store.DeliveryOrder{Subject: "acme/llm#18", At: t0})
	accept("install", store.DeliveryOrder{})

	got := ids(claimDeliveries(t, e, 10))
	if len(got) != 3 || got["opened"].ID == "" || got["pr18"].ID == "" || got["install"].ID == "" {
		t.Fatalf("first claim = %v, want opened, pr18 and install only", keys(got))
	}
	for _, id := range []string{"pr18", "install"} {
		if err := e.st.CompleteDelivery(e.ctx, id, got[id].LeaseID); err != nil {
			t.Fatal(err)
		}
	}
	if d := got["opened"]; d.Subject != "acme/llm#17" || !d.OrderAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("opened: subject %q order %v", d.Subject, d.OrderAt)
	}
	// While "opened" is held, nothing else of PR 17 is claimable, from
	// either replica.
	if ds, err := other.ClaimDeliveries(e.ctx, 10, time.Minute); err != nil || len(ds) != 0 {
		t.Fatalf("claim while opened is held = %v, %v; want none", keys(ids(ds)), err)
	}
	// "opened" fails on GitHub's weather and waits out its backoff: "closed"
	// still waits behind it.
	if err := e.st.RetryDelivery(e.ctx, "opened", got["opened"].LeaseID, e.clock.Now().Add(5*time.Minute), "502"); err != nil {
		t.Fatal(err)
	}
	if ds := claimDeliveries(t, e, 10); len(ds) != 0 {
		t.Fatalf("claim while opened waits to retry = %v; want none", keys(ids(ds)))
	}
	e.clock.Advance(5 * time.Minute)
	again := claimDeliveries(t, e, 10)
	if len(again) != 1 || again[0].ID != "opened" {
		t.Fatalf("claim after the backoff = %v; want opened", keys(ids(again)))
	}
	if err := e.st.CompleteDelivery(e.ctx, "opened", again[0].LeaseID); err != nil {
		t.Fatal(err)
	}
	// Then "closed"; a late "edited" from minute 0 arrives while "closed"
	// is held and waits for it rather than running beside it.
	next := claimDeliveries(t, e, 10)
	if len(next) != 1 || next[0].ID != "closed" {
		t.Fatalf("claim after opened = %v; want closed", keys(ids(next)))
	}
	accept("edited", pr17(0))
	if ds := claimDeliveries(t, e, 10); len(ds) != 0 {
		t.Fatalf("claim while closed is held = %v; want none", keys(ids(ds)))
	}
	// "closed" fails for good: it no longer blocks; the late "edited" goes
	// before "sync".
	if err := e.st.FailDelivery(e.ctx, "closed", next[0].LeaseID, "bad payload"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"edited", "sync"} {
		ds := claimDeliveries(t, e, 10)
		if len(ds) != 1 || ds[0].ID != want {
			t.Fatalf("claim = %v; want %s", keys(ids(ds)), want)
		}
		if err := e.st.CompleteDelivery(e.ctx, want, ds[0].LeaseID); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(m map[string]store.Delivery) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A delivery accepted to be placed later (the webhook's answer does not
// read the payload) cannot be claimed until PlaceDeliveries has placed it;
// then its subject's order holds as if it had been placed on arrival. A
// redelivery keeps the place its first delivery got, and one placed twice
// (two replicas) keeps one place.
func testInboxPlaceLater(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	other := e.open(t) // a second replica
	t0 := e.clock.Now().Add(-time.Hour)
	// The payload names the place: "subject@minute", or nothing.
	place := func(_ string, payload []byte) store.DeliveryOrder {
		subject, min, ok := strings.Cut(string(payload), "@")
		if !ok {
			return store.DeliveryOrder{}
		}
		m, _ := strconv.Atoi(min)
		return store.DeliveryOrder{Subject: subject, At: t0.Add(time.Duration(m) * time.Minute)}
	}
	for _, d := range []struct{ id, payload string }{
		{"closed", "acme/llm#17@2"}, // arrives before the event it follows
		{"opened", "acme/llm#17@1"},
		{"install", "{}"},
	} {
		if a, err := e.st.AcceptDelivery(e.ctx, d.id, "pull_request", []byte(d.payload), store.DeliveryOrder{Later: true}); err != nil || a != store.AcceptedNew {
			t.Fatalf("accept %s = %v, %v", d.id, a, err)
		}
		e.clock.Advance(time.Millisecond)
	}
	if ds := claimDeliveries(t, e, 10); len(ds) != 0 {
		t.Fatalf("claim before placing = %v; want none", keys(ids(ds)))
	}
	// A redelivery before the place is known changes nothing.
	if a, err := e.st.AcceptDelivery(e.ctx, "opened", "pull_request", []byte("acme/llm#17@1"), store.DeliveryOrder{Later: true}); err != nil || a != store.AcceptedAgain {
		t.Fatalf("redeliver opened = %v, %v", a, err)
	}
	// Two replicas place in turn: the second places what the first left.
	n1, err1 := e.st.PlaceDeliveries(e.ctx, 2, place)
	n2, err2 := other.PlaceDeliveries(e.ctx, 10, place)
	if err1 != nil || err2 != nil || n1 != 2 || n1+n2 < 3 {
		t.Fatalf("place = %d, %v and %d, %v; want 2 then the rest", n1, err1, n2, err2)
	}
	if n, err := e.st.PlaceDeliveries(e.ctx, 10, place); err != nil || n != 0 {
		t.Fatalf("place again = %d, %v; want 0", n, err)
	}
	got := ids(claimDeliveries(t, e, 10))
	if len(got) != 2 || got["opened"].ID == "" || got["install"].ID == "" {
		t.Fatalf("claim after placing = %v; want opened and install", keys(got))
	}
	if d := got["opened"]; d.Subject != "acme/llm#17" || !d.OrderAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("opened placed at %q %v", d.Subject, d.OrderAt)
	}
	if d := got["install"]; d.Subject != "" || d.OrderAt.IsZero() {
		t.Errorf("install placed at %q %v; want no subject, its arrival", d.Subject, d.OrderAt)
	}
	// A redelivery of a placed one keeps its place.
	if _, err := e.st.AcceptDelivery(e.ctx, "closed", "pull_request", []byte("acme/llm#17@2"), store.DeliveryOrder{Later: true}); err != nil {
		t.Fatal(err)
	}
	if d, err := e.st.GetDelivery(e.ctx, "closed"); err != nil || d.Subject != "acme/llm#17" || !d.OrderAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("closed after its redelivery: %q %v, %v", d.Subject, d.OrderAt, err)
	}
	if err := e.st.CompleteDelivery(e.ctx, "opened", got["opened"].LeaseID); err != nil {
		t.Fatal(err)
	}
	if next := claimDeliveries(t, e, 10); len(next) != 1 || next[0].ID != "closed" {
		t.Fatalf("claim after opened = %v; want closed", keys(ids(next)))
	}
}

func ids(ds []store.Delivery) map[string]store.Delivery {
	m := map[string]store.Delivery{}
	for _, d := range ds {
		m[d.ID] = d
	}
	return m
}
