// Package setuptest walks the setup flow the way a browser does, for tests
// in other packages: open the setup link, submit the manifest form to the
// (test) GitHub, follow its redirect back.
package setuptest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// Browser is an HTTP client with cookies that follows redirects.
func Browser(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

// Page is a fetched HTML page.
type Page struct {
	URL    *url.URL
	Status int
	Body   string
}

// Get fetches u.
func Get(t testing.TB, b *http.Client, u string) Page {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return read(t, resp)
}

// Create opens startURL (the setup link), types org ("" for the user's
// account) into the page's one form and presses "Create the GitHub App",
// then "Continue to GitHub" on the confirmation. It returns the page the
// browser ends on after GitHub's redirect.
func Create(t testing.TB, b *http.Client, startURL, org string) Page {
	t.Helper()
	p := Get(t, b, startURL)
	if p.Status != http.StatusOK {
		t.Fatalf("setup page: %d\n%s", p.Status, p.Body)
	}
	p = Submit(t, b, p, "create", url.Values{"org": {org}})
	if p.Status != http.StatusOK {
		t.Fatalf("setup confirmation for %q: %d\n%s", org, p.Status, p.Body)
	}
	return Submit(t, b, p, "github", nil)
}

// Submit posts the form with id on page p, with set's fields replacing
// the form's own, and returns where the browser ends.
func Submit(t testing.TB, b *http.Client, p Page, id string, set url.Values) Page {
	t.Helper()
	action, fields, err := Form(p.Body, id)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.URL, err, p.Body)
	}
	for k, v := range set {
		fields[k] = v
	}
	target, err := p.URL.Parse(action)
	if err != nil {
		t.Fatalf("form %s action %q: %v", id, action, err)
	}
	resp, err := b.PostForm(target.String(), fields)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	return read(t, resp)
}

// Form returns the action and fields of the form with id in page.
func Form(page, id string) (action string, fields url.Values, err error) {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return "", nil, err
	}
	var form *html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "form" && attr(n, "id") == id {
			form = n
		}
		for c := n.FirstChild; c != nil && form == nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if form == nil {
		return "", nil, fmt.Errorf("no form %q", id)
	}
	fields = url.Values{}
	var inputs func(n *html.Node)
	inputs = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" && attr(n, "name") != "" {
			fields.Add(attr(n, "name"), attr(n, "value"))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			inputs(c)
		}
	}
	inputs(form)
	return attr(form, "action"), fields, nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func read(t testing.TB, resp *http.Response) Page {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Page{URL: resp.Request.URL, Status: resp.StatusCode, Body: string(b)}
}
