package web_test

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/history"
	"github.com/perfgate/perfgate/internal/github/web"
)

func TestPages(t *testing.T) {
	f := newFixture(t)
	bad := history.Commit(repo, stepDay)
	good := history.Commit(repo, stepDay-1)
	cases := []struct {
		name, path string
		code       int
		want       []string
		notWant    []string
	}{
		// Nothing on / tells a stranger that private repositories exist.
		{"index lists the public repository only", "/", 200, []string{"/r/acme/inference"}, []string{"secret", "hidden", "1 private"}},
		// One event for the step, not a row per change point; a card per
		// metric and cell with its week-over-week change; commits link to
		// GitHub.
		{"repository", "/r/" + repo, 200, []string{"Open regressions", `class="event bad"`, "of one step across", "matrix cells", bad[:7],
			"https://github.com/" + repo + "/commit/" + bad, "https://github.com/" + repo + "/compare/" + good + "..." + bad,
			`class="card regressed"`, `data-metric="tpot_p99" data-key="nightly/c=64"`, "week over week", `<polyline points="`, "open regression"},
			[]string{"Open change points"}},
		{"series", "/r/" + repo + "/series?key=nightly/c=1&metric=tpot_p99", 200, []string{`id="chart-data"`, `"changes":[{`, "v0.2.0", bad[:7], "/static/uplot/uPlot.iife.min.js",
			`<select name="key">`, `<option selected>nightly/c=1</option>`, `<option>nightly/c=64</option>`, `<option selected>tpot_p99</option>`, `name="since"`, `name="until"`,
			"https://github.com/" + repo + "/commit/" + bad}, nil},
		{"series in a date range", "/r/" + repo + "/series?key=nightly/c=1&metric=tpot_p99&since=2025-04-10&until=2025-04-20", 200, []string{`value="2025-04-10"`, `value="2025-04-20"`, "&amp;since=2025-04-10&amp;until=2025-04-20"}, nil},
		{"series range the wrong way round", "/r/" + repo + "/series?key=nightly/c=1&metric=tpot_p99&since=2025-04-20&until=2025-04-10", 400, []string{"is before since"}, nil},
		{"weekly", "/r/" + repo + "/series?key=nightly/c=1&metric=tpot_p99&view=weekly", 200, []string{"Weeks", "2025-W1", `data-kind="weekly"`, "min–max of the week", "week with a regressed night", `"baseline":[`}, []string{`"baseline":[null`}},
		{"check run", "/r/" + repo + "/checks/" + bad + "/nightly", 200, []string{`id="verdict"`, "c=1 tpot_p99", "regression", `class="cdf-data"`, "NVIDIA A100", "util_pct", "run 1/3", "gate.regression",
			"https://github.com/" + repo + "/commit/" + bad}, []string{"0001-01-01"}},
		{"job log", "/r/" + repo + "/jobs/1/log", 200, []string{"perfgate agent: job 1"}, nil},
		{"series without key", "/r/" + repo + "/series?metric=tpot_p99", 400, []string{"?key="}, nil},
		{"series with a bad since", "/r/" + repo + "/series?key=nightly/c=1&metric=tpot_p99&since=yesterday", 400, []string{"2025-01-31"}, nil},
		{"unknown series", "/r/" + repo + "/series?key=nightly/c=9&metric=tpot_p99", 404, []string{"no tpot_p99 points"}, nil},
		{"unknown check run", "/r/" + repo + "/checks/" + strings.Repeat("0", 40) + "/nightly", 404, []string{"no nightly check run"}, nil},
		{"private without a grant", "/r/" + private, 404, []string{"signed grant"}, nil},
		{"private API without a grant", "/api/data/repos/" + private + "/series", 404, []string{`"error"`}, nil},
		{"static asset", "/static/uplot/LICENSE", 200, []string{"MIT"}, nil},
		{"unknown path", "/nothing", 404, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, hdr := get(t, nil, f.srv.URL+tc.path)
			if code != tc.code {
				t.Fatalf("GET %s = %d, want %d:\n%.400s", tc.path, code, tc.code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s lacks %q", tc.path, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(body, w) {
					t.Errorf("GET %s shows %q", tc.path, w)
				}
			}
			// A signed grant in a page's URL must not leak to the sites its
			// links open.
			if got := hdr.Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("GET %s: Referrer-Policy %q, want no-referrer", tc.path, got)
			}
		})
	}
}

func TestSeriesAPI(t *testing.T) {
	f := newFixture(t)
	code, body, _ := get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/series/points?key=nightly/c=1&metric=output_throughput")
	if code != 200 {
		t.Fatalf("points: %d %s", code, body)
	}
	var s web.Series
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Points) != days || s.Unit == "" || s.Direction != "lower_is_worse" {
		t.Fatalf("series: %d points, unit %q, direction %q", len(s.Points), s.Unit, s.Direction)
	}
	if len(s.ChangePoints) != 1 || s.ChangePoints[0].BadCommit != history.Commit(repo, stepDay) || !s.ChangePoints[0].Regression {
		t.Errorf("change points = %+v, want the planted step at night %d", s.ChangePoints, stepDay)
	}
	if len(s.Baselines) != 1 || s.Points[5].Baseline == nil || len(s.Releases) != 1 || s.Releases[0].Commit != history.Commit(repo, 10) {
		t.Errorf("baselines %+v, releases %+v", s.Baselines, s.Releases)
	}
	regressed := 0
	for i, p := range s.Points {
		if p.Commit != history.Commit(repo, i) || p.URL == "" {
			t.Fatalf("point %d: commit %s url %q", i, p.Commit, p.URL)
		}
		if p.Regression {
			regressed++
			if i < stepDay {
				t.Errorf("night %d, before the step, marked as a regression", i)
			}
		}
	}
	if regressed == 0 {
		t.Error("no night after the step is marked as a regression")
	}

	code, body, hdr := get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/series/points?key=nightly/c=1&metric=output_throughput&format=csv")
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if code != 200 || err != nil || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV: %d %v %s", code, err, hdr.Get("Content-Type"))
	}
	if len(rows) != days+1 || rows[0][0] != "date" || rows[stepDay+1][7] == "" {
		t.Errorf("CSV: %d rows, header %v, step row %v", len(rows), rows[0], rows[stepDay+1])
	}

	code, body, _ = get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/series?")
	var list struct {
		Series []struct{ Key, Metric string }
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Series) < 10 {
		t.Errorf("series list: %d, %d series", code, len(list.Series))
	}
	code, body, _ = get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/changepoints?metric=tpot_p99")
	var cps struct {
		ChangePoints []struct {
			Key, GoodCommit, BadCommit string `json:"-"`
			Bad                        string `json:"bad_commit"`
			Good                       string `json:"good_commit"`
		} `json:"change_points"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &cps) != nil || len(cps.ChangePoints) != 2 || cps.ChangePoints[0].Good != history.Commit(repo, stepDay-1) {
		t.Errorf("change points API: %d %s", code, body)
	}
	if code, body, _ := get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/changepoints?format=csv"); code != 200 || !strings.Contains(body, "good_commit") {
		t.Errorf("change points CSV: %d %.200s", code, body)
	}
	code, body, _ = get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/checks?tier=nightly&limit=5")
	var checks struct {
		CheckRuns []struct{ SHA, State string } `json:"check_runs"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &checks) != nil || len(checks.CheckRuns) != 5 {
		t.Errorf("check runs API: %d %.300s", code, body)
	}
	code, body, _ = get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/checks/"+history.Commit(repo, stepDay)+"/nightly")
	var cr web.CheckRun
	if code != 200 || json.Unmarshal([]byte(body), &cr) != nil || cr.Report == nil || len(cr.CDFs) != 6 || len(cr.Runs) == 0 || len(cr.Runs[0].Head) != 3 || len(cr.Runs[0].Base) != 3 {
		t.Errorf("check run API: %d; report %v, %d CDFs, runs %+v", code, cr.Report != nil, len(cr.CDFs), cr.Runs)
	}
	if code, body, _ := get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/jobs/1/runs?format=csv"); code != 200 || !strings.Contains(body, "tpot_p99") {
		t.Errorf("runs CSV: %d %.200s", code, body)
	}
}

func TestSignedLinks(t *testing.T) {
	f := newFixture(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	link := f.signer.Sign(private, f.srv.URL+"/r/"+private)
	if code, body, _ := get(t, c, link); code != 200 || !strings.Contains(body, private) {
		t.Fatalf("signed link: %d", code)
	}
	// The grant became a cookie: the rest of the repository opens without it.
	if code, _, _ := get(t, c, f.srv.URL+"/api/data/repos/"+private+"/series"); code != 200 {
		t.Errorf("API after the grant: %d", code)
	}
	if code, body, _ := get(t, c, f.srv.URL+"/"); code != 200 || !strings.Contains(body, "/r/"+private) {
		t.Errorf("index after the grant does not list %s", private)
	}
	// A grant opens only its own repository, and only until it expires.
	other := f.signer.Sign(repo, f.srv.URL+"/r/"+private)
	if code, _, _ := get(t, nil, other); code != 404 {
		t.Errorf("another repository's grant opened %s: %d", private, code)
	}
	u, _ := url.Parse(link)
	tok := u.Query().Get(web.AccessParam)
	// Change a character that carries signature bits: the last ones of a
	// base64 string may be padding bits, and "AA" could be what was there.
	flip := byte('A')
	if tok[len(tok)-3] == 'A' {
		flip = 'B'
	}
	tampered := f.srv.URL + "/r/" + private + "?access=" + tok[:len(tok)-3] + string(flip) + tok[len(tok)-2:]
	if code, _, _ := get(t, nil, tampered); code != 404 {
		t.Errorf("tampered grant: %d", code)
	}
	old := web.NewSigner([]byte("test key"), time.Hour, func() time.Time { return time.Now().Add(-2 * time.Hour) })
	if code, _, _ := get(t, nil, old.Sign(private, f.srv.URL+"/r/"+private)); code != 404 {
		t.Errorf("expired grant: %d", code)
	}
	// Behind a TLS-terminating proxy the grant cookie is Secure, so no
	// plain-HTTP request ever carries it; on plain HTTP it cannot be. A
	// link that lives 90 days leaves a cookie for CookieTTL only.
	long := web.NewSigner([]byte("test key"), 90*24*time.Hour, nil).Sign(private, f.srv.URL+"/r/"+private)
	for _, tc := range []struct {
		header, value string
		secure        bool
	}{{"", "", false}, {"X-Forwarded-Proto", "https", true}, {"Forwarded", `for=192.0.2.60;proto=https;by=203.0.113.43`, true}, {"X-Forwarded-Proto", "http", false}} {
		req, _ := http.NewRequest(http.MethodGet, long, nil)
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cs := resp.Cookies()
		if len(cs) != 1 || cs[0].Secure != tc.secure || !cs[0].HttpOnly {
			t.Errorf("%s: %s: cookies %+v, want one HttpOnly cookie with Secure %v", tc.header, tc.value, cs, tc.secure)
		} else if left := time.Until(cs[0].Expires); left > web.CookieTTL || left < web.CookieTTL-time.Minute {
			t.Errorf("the grant cookie lives %v, want %v (shorter than the link's grant)", left, web.CookieTTL)
		}
	}
	if got := f.h.CheckRunURL(private, "abc", "quick"); !strings.HasPrefix(got, "https://perfgate.example/r/"+private+"/checks/abc/quick?access=") {
		t.Errorf("details link = %s", got)
	}
}

// GPU usage: the API sums the seeded nightly jobs' attempts by tier and
// week, the repository page shows them, and a private repository's usage
// needs a grant like the rest of it.
func TestUsage(t *testing.T) {
	f := newFixture(t)
	code, body, _ := get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/usage")
	var u web.Usage
	if code != 200 || json.Unmarshal([]byte(body), &u) != nil {
		t.Fatalf("usage API: %d %.300s", code, body)
	}
	jobs := 0
	for _, r := range u.Rows {
		if r.Repo != repo || r.Tier != "nightly" || r.Week == "" || r.GPUHours < 0 {
			t.Errorf("row %+v", r)
		}
		jobs += r.Jobs
	}
	if u.Weeks != 8 || jobs != 2*days || !strings.Contains(u.Note, "baseline reuse only") {
		t.Errorf("usage = %d weeks, %d jobs (want %d seeded), note %q", u.Weeks, jobs, 2*days, u.Note)
	}
	if code, body, _ := get(t, nil, f.srv.URL+"/r/"+repo); code != 200 || !strings.Contains(body, `id="usage"`) || !strings.Contains(body, "GPU usage, last 8 weeks") {
		t.Errorf("repository page without the usage table: %d", code)
	}
	if code, _, _ := get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/usage?weeks=0"); code != 400 {
		t.Errorf("weeks=0: %d, want 400", code)
	}
	if code, _, _ := get(t, nil, f.srv.URL+"/api/data/repos/"+private+"/usage"); code != 404 {
		t.Errorf("private usage without a grant: %d, want 404", code)
	}
}
