// Package githubtest is a fake GitHub REST API for tests and the demo: an HTTP server
// that go-github and go-githubapp's real clients talk to. It issues
// installation tokens only for a correctly signed app JWT, demands those
// tokens on every other call, validates requests the way GitHub does
// (answering 422 with GitHub's error shape), records every request, and can
// be scripted to fail.
package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
)

// Defaults shared with the webhook fixtures in testdata/webhooks.
const (
	AppID          int64 = 31337
	AppSlug              = "perfgate"
	InstallationID int64 = 4242
	WebhookSecret        = "perfgate-test-webhook-secret"
)

// Request is one recorded API call.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   map[string]any // decoded JSON object; nil when there was none
	Status int            // what the fake answered
}

// Server is the fake GitHub. Start it (tests: ghtest.New, which closes it
// when the test ends).
type Server struct {
	// URL is the fake's base address, "http://127.0.0.1:port".
	URL      string
	srv      *http.Server
	inflight sync.WaitGroup // handlers still running; Close waits for them
	Key      *rsa.PrivateKey
	KeyPEM   []byte

	mu             sync.Mutex
	requests       []Request
	installations  map[int64]bool
	tokens         map[string]int64
	pulls          map[string]json.RawMessage
	files          map[string][]File
	prCommits      map[string][]string
	timelines      map[string][]TimelineEvent
	contents       map[string][]byte
	permissions    map[string]Permission
	checkRuns      map[int64]*CheckRun
	checkOrder     []int64
	comments       []Comment
	reactions      map[string]bool
	issues         []*Issue
	repos          map[string]*repoState
	failures       []*failure
	lost           []*failure // lostanswer.go
	answersLost    int
	stall          chan struct{}  // StallAll
	hookDeliveries []HookDelivery // hookdeliveries.go
	redelivered    []int64
	outage         *outage
	nextID         int64
	manifest       *manifestState      // manifest.go
	gitDirs        map[string]string   // compare.go
	downloads      map[string]download // codeload token → what it may fetch (tarball.go)
	oauthOnce      sync.Once
	users          *oauthState // oauth.go
}

// File is one entry of a pull request's file list.
type File struct {
	Filename         string `json:"filename"`
	PreviousFilename string `json:"previous_filename,omitempty"`
	Status           string `json:"status"`
}

// Permission is a collaborator's access as GitHub reports it: permission is
// the legacy level (admin, write, read, none), role_name the real role.
type Permission struct {
	Permission string `json:"permission"`
	RoleName   string `json:"role_name"`
}

// CheckRun is the fake's current view of one check run.
type CheckRun struct {
	ID         int64
	Repo       string
	Name       string
	HeadSHA    string
	ExternalID string
	Status     string
	Conclusion string
	Title      string
	Summary    string
	Text       string
	Actions    []map[string]any
	// Annotations are every output.annotations entry the run was sent,
	// appended request after request as GitHub keeps them.
	Annotations []map[string]any
	// Statuses lists every status the run was put in, in order, so tests
	// can assert queued → in_progress → completed.
	Statuses []string
}

// Comment is an issue comment the app posted.
type Comment struct {
	ID     int64
	Repo   string
	Number int
	Body   string
}

type failure struct {
	method, path string
	times        int
	status       int
	header       http.Header
	body         string
}

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

// Start starts a fake GitHub outside a test (the demo's local GitHub); the
// caller closes it.
func Start() *Server {
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(fmt.Sprintf("githubtest: generate RSA key: %v", err))
		}
		testKey = k
	})
	s := &Server{
		Key:           testKey,
		KeyPEM:        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey)}),
		installations: map[int64]bool{InstallationID: true},
		tokens:        map[string]int64{},
		pulls:         map[string]json.RawMessage{},
		files:         map[string][]File{},
		prCommits:     map[string][]string{},
		timelines:     map[string][]TimelineEvent{},
		contents:      map[string][]byte{},
		permissions:   map[string]Permission{},
		checkRuns:     map[int64]*CheckRun{},
		reactions:     map[string]bool{},
		downloads:     map[string]download{},
		nextID:        1000,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("githubtest: listen: %v", err))
	}
	s.URL = "http://" + ln.Addr().String()
	routes := s.routes()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		routes.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }() // returns http.ErrServerClosed on Close
	return s
}

// Close stops the fake: it closes the listener and every connection, then
// waits for the handlers still running (a stalled one waits for its
// release), as httptest's Close does.
func (s *Server) Close() {
	_ = s.srv.Close() // the only error is the listener's, already closing
	s.inflight.Wait()
}

// AppConfig returns a go-githubapp configuration pointing at the fake.
func (s *Server) AppConfig() githubapp.Config {
	var c githubapp.Config
	c.WebURL = s.URL
	c.V3APIURL = s.URL + "/"
	c.V4APIURL = s.URL + "/graphql"
	c.App.IntegrationID = AppID
	c.App.PrivateKey = string(s.KeyPEM)
	c.App.WebhookSecret = WebhookSecret
	return c
}

// SetPullRequest stores the JSON object GET /repos/{o}/{r}/pulls/{n} returns.
func (s *Server) SetPullRequest(repo string, number int, pr json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[prKey(repo, number)] = pr
}

// SetFiles stores a pull request's changed files.
func (s *Server) SetFiles(repo string, number int, files []File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[prKey(repo, number)] = files
}

// SetContent stores a file at ref ("main", or a SHA) for the contents API;
// nil content removes it (404).
func (s *Server) SetContent(repo, ref, path string, content []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if content == nil {
		delete(s.contents, repo+"@"+ref+":"+path)
		return
	}
	s.contents[repo+"@"+ref+":"+path] = content
}

// SetPermission sets a user's collaborator permission on repo.
func (s *Server) SetPermission(repo, user, permission, roleName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permissions[repo+":"+strings.ToLower(user)] = Permission{Permission: permission, RoleName: roleName}
}

// FailNext makes the next n calls of method to path answer status with a
// GitHub-style error body. header may add e.g. Retry-After.
func (s *Server) FailNext(method, path string, n, status int, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &failure{method: method, path: path, times: n, status: status, header: header,
		body: fmt.Sprintf(`{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, http.StatusText(status))})
}

// RateLimitNext makes the next n calls of method to path answer 403 with
// X-RateLimit-Remaining: 0 and the given reset time, as GitHub does when an
// installation's primary rate limit is spent.
func (s *Server) RateLimitNext(method, path string, n int, reset time.Time) {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Used", "5000")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &failure{method: method, path: path, times: n, status: http.StatusForbidden, header: h,
		body: `{"message":"API rate limit exceeded for installation ID 4242.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`})
}

// Requests returns every recorded request in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestsTo returns the recorded requests with this method and path.
func (s *Server) RequestsTo(method, path string) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// CheckRuns returns the check runs in creation order.
func (s *Server) CheckRuns() []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CheckRun, 0, len(s.checkOrder))
	for _, id := range s.checkOrder {
		out = append(out, *s.checkRuns[id])
	}
	return out
}

// Comments returns the issue comments posted, in order.
func (s *Server) Comments() []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Comment(nil), s.comments...)
}

// HasReaction reports whether content was added to issue comment id.
func (s *Server) HasReaction(repo string, commentID int64, content string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reactions[fmt.Sprintf("%s:%d:%s", repo, commentID, content)]
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", s.createToken)
	mux.HandleFunc("POST /repos/{owner}/{repo}/check-runs", s.auth(s.createCheckRun))
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/check-runs/{id}", s.auth(s.updateCheckRun))
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", s.auth(s.listCheckRunsForRef))
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", s.auth(s.createComment))
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/comments", s.auth(s.listComments))
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", s.auth(s.createReaction))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", s.auth(s.getPull))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}/files", s.auth(s.listFiles))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}/commits", s.auth(s.listPullCommits))
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/timeline", s.auth(s.listTimeline))
	mux.HandleFunc("GET /repos/{owner}/{repo}/contents/{path...}", s.auth(s.getContent))
	mux.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{user}/permission", s.auth(s.getPermission))
	s.issueRoutes(mux) // issues.go
	s.hookDeliveryRoutes(mux)
	s.manifestRoutes(mux)
	s.oauthRoutes(mux)   // oauth.go
	s.compareRoutes(mux) // compare.go
	mux.HandleFunc("GET /repos/{owner}/{repo}/tarball/{ref...}", s.auth(s.getTarball))
	mux.HandleFunc("GET /_codeload/{owner}/{repo}/legacy.tar.gz/{sha}", s.codeload)
	return s.record(mux)
}

// record logs the request and applies scripted failures before routing.
func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(raw)))
		var body map[string]any
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &body)
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		s.mu.Lock()
		idx := len(s.requests)
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
		f := s.outageFailure()
		if f == nil {
			f = s.takeFailure(r.Method, r.URL.Path)
		}
		var lost *failure
		if f == nil {
			lost = s.takeLost(r.Method, r.URL.Path)
		}
		stall := s.stall
		s.mu.Unlock()
		if stall != nil {
			select {
			case <-stall:
			case <-r.Context().Done():
				return
			}
		}
		if lost != nil {
			applyThenLose(next, rec, r, lost)
		} else if f != nil {
			for k, v := range f.header {
				w.Header()[k] = v
			}
			writeRaw(rec, f.status, f.body)
		} else {
			next.ServeHTTP(rec, r)
		}
		s.mu.Lock()
		s.requests[idx].Status = rec.status
		s.mu.Unlock()
	})
}

func (s *Server) takeFailure(method, path string) *failure {
	for i, f := range s.failures {
		if f.method == method && f.path == path && f.times > 0 {
			f.times--
			if f.times == 0 {
				s.failures = append(s.failures[:i], s.failures[i+1:]...)
			}
			return f
		}
	}
	return nil
}

// auth demands an installation token the fake issued.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		tok := strings.TrimPrefix(strings.TrimPrefix(a, "token "), "Bearer ")
		s.mu.Lock()
		_, ok := s.tokens[tok]
		s.mu.Unlock()
		if a == "" || !ok {
			writeError(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		h(w, r)
	}
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	jwt := strings.TrimPrefix(auth, "Bearer ")
	iss := jwtIssuer(jwt)
	pub := s.appKey(iss)
	if pub == nil {
		writeError(w, http.StatusUnauthorized, fmt.Sprintf("Integration not found: no app %d", iss))
		return
	}
	if err := verifyAppJWT(jwt, pub, iss, time.Now()); err != nil {
		writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded: "+err.Error())
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	known := s.installations[id]
	var tok string
	if known {
		s.nextID++
		tok = fmt.Sprintf("ghs_fake%d_%d", id, s.nextID)
		s.tokens[tok] = id
	}
	s.mu.Unlock()
	if !known {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"permissions":          map[string]string{"checks": "write", "contents": "read", "issues": "write", "metadata": "read", "pull_requests": "read"},
		"repository_selection": "selected",
	})
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	pr, ok := s.pulls[prKey(repoOf(r), n)]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(pr)
}

// maxPRFiles is GitHub's cap on the files the list endpoint returns.
const maxPRFiles = 3000

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	perPage, page := paging(r)
	s.mu.Lock()
	all := s.files[prKey(repoOf(r), n)]
	s.mu.Unlock()
	visible := all[:min(len(all), maxPRFiles)]
	last := max(1, (len(visible)+perPage-1)/perPage)
	start := min((page-1)*perPage, len(visible))
	end := min(start+perPage, len(visible))
	out := make([]map[string]any, 0, end-start)
	for _, f := range visible[start:end] {
		m := map[string]any{"sha": "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391", "filename": f.Filename, "status": f.Status,
			"additions": 1, "deletions": 0, "changes": 1,
			"blob_url": s.URL + "/blob/" + f.Filename,
			"raw_url":  s.URL + "/raw/" + f.Filename,
			"patch":    "@@ -0,0 +1 @@\n+x"}
		if f.Status == "" {
			m["status"] = "modified"
		}
		if f.PreviousFilename != "" {
			m["previous_filename"] = f.PreviousFilename
		}
		out = append(out, m)
	}
	link := func(p int, rel string) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		q := u.Query()
		q.Set("per_page", strconv.Itoa(perPage))
		q.Set("page", strconv.Itoa(p))
		u.RawQuery = q.Encode()
		return fmt.Sprintf(`<%s>; rel="%s"`, u.String(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(page-1, "prev"), link(1, "first"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getContent(w http.ResponseWriter, r *http.Request) {
	ref := strings.TrimPrefix(r.URL.Query().Get("ref"), "refs/heads/")
	if ref == "" {
		ref = "main"
	}
	path := r.PathValue("path")
	s.mu.Lock()
	body, ok := s.contents[repoOf(r)+"@"+ref+":"+path]
	dir, inGit := s.gitDirs[repoOf(r)]
	s.mu.Unlock()
	if !ok && inGit {
		// A repository SetGitRepo names serves its files at the ref (a
		// branch or SHA) as git has them.
		body, ok = gitFile(dir, ref, path)
	}
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	name := path[strings.LastIndex(path, "/")+1:]
	self := s.URL + r.URL.Path + "?ref=" + url.QueryEscape(ref)
	writeJSON(w, http.StatusOK, map[string]any{
		"type": "file", "encoding": "base64", "size": len(body), "name": name, "path": path,
		"content": wrappedBase64(body), "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
		"url": self, "git_url": s.URL + "/git/blobs/3d21ec5", "html_url": s.URL + "/blob/" + ref + "/" + path,
		"download_url": s.URL + "/raw/" + ref + "/" + path,
		"_links":       map[string]string{"self": self, "git": s.URL + "/git/blobs/3d21ec5", "html": s.URL + "/blob/" + ref + "/" + path},
	})
}

func (s *Server) getPermission(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	s.mu.Lock()
	p, ok := s.permissions[repoOf(r)+":"+strings.ToLower(user)]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"permission": p.Permission, "role_name": p.RoleName,
		"user": map[string]any{"login": user, "id": 1, "type": "User"},
	})
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body *string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == nil {
		writeValidation(w, "IssueComment", "missing_field", "body")
		return
	}
	if n := len([]rune(*in.Body)); n > 65536 {
		writeValidationMsg(w, "IssueComment", "body", fmt.Sprintf("body is too long (maximum is 65536 characters, got %d)", n))
		return
	}
	n, _ := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	s.nextID++
	c := Comment{ID: s.nextID, Repo: repoOf(r), Number: n, Body: *in.Body}
	s.comments = append(s.comments, c)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": c.ID, "body": c.Body, "html_url": fmt.Sprintf("%s/%s/pull/%d#issuecomment-%d", s.URL, c.Repo, n, c.ID),
		"user": map[string]any{"login": AppSlug + "[bot]", "type": "Bot", "id": 31337001},
	})
}

var reactionContents = map[string]bool{"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true, "hooray": true, "rocket": true, "eyes": true}

func (s *Server) createReaction(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Content string `json:"content"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	if !reactionContents[in.Content] {
		writeValidation(w, "Reaction", "invalid", "content")
		return
	}
	key := repoOf(r) + ":" + r.PathValue("id") + ":" + in.Content
	s.mu.Lock()
	existed := s.reactions[key]
	s.reactions[key] = true
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	status := http.StatusCreated
	if existed {
		status = http.StatusOK // GitHub answers 200 when the reaction already exists
	}
	writeJSON(w, status, map[string]any{"id": id, "content": in.Content, "user": map[string]any{"login": AppSlug + "[bot]"}})
}

func prKey(repo string, n int) string { return fmt.Sprintf("%s#%d", repo, n) }

func repoOf(r *http.Request) string { return r.PathValue("owner") + "/" + r.PathValue("repo") }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, string(b))
}

func writeRaw(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
}

// writeValidation answers 422 in GitHub's "Validation Failed" shape, which
// go-github decodes into ErrorResponse.Errors.
func writeValidation(w http.ResponseWriter, resource, code, field string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]string{{"resource": resource, "code": code, "field": field}},
		"documentation_url": "https://docs.github.com/rest",
	})
}

func writeValidationMsg(w http.ResponseWriter, resource, field, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]string{{"resource": resource, "code": "custom", "field": field, "message": msg}},
		"documentation_url": "https://docs.github.com/rest",
	})
}

// paging reads GitHub's per_page (default 30, at most 100) and page
// (default 1) query parameters.
func paging(r *http.Request) (perPage, page int) {
	perPage, page = 30, 1
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	return perPage, page
}
