package setup

import (
	"bytes"
	"html/template"
	"net/http"
)

type pageData struct {
	Action, Manifest, Org, PublicURL, WebURL string
}

type doneData struct {
	Credentials
	Fresh, Installed bool
}

type errorData struct {
	Title, Message, Back string
}

const layout = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{block "title" .}}perfgate setup{{end}}</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;color:#1f2328}
h1{font-size:1.6rem}code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px}
button{font:inherit;padding:.5rem 1rem;border-radius:6px;border:1px solid #1f883d;background:#1f883d;color:#fff;cursor:pointer}
input{font:inherit;padding:.35rem .5rem}.muted{color:#656d76}
</style></head><body>{{block "body" .}}{{end}}</body></html>`

var (
	pageTemplate = template.Must(template.Must(template.New("page").Parse(layout)).Parse(`
{{define "title"}}Set up perfgate{{end}}
{{define "body"}}
<h1>Set up perfgate</h1>
<p>perfgate has no GitHub App yet. The button below sends perfgate's manifest to GitHub, which creates
the app with perfgate's events and permissions and its webhook pointing at <code>{{.PublicURL}}</code>,
then sends you back here. perfgate stores the app's ID, private key and webhook secret and starts.</p>
<form method="get" action="/setup" id="owner">
<label for="org">Organisation (leave empty for your personal account):</label>
<input id="org" name="org" value="{{.Org}}" placeholder="my-org" autocomplete="off">
<button type="submit" id="use-org">Use</button>
</form>
<form method="post" action="{{.Action}}" id="create">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<p><button type="submit" id="create-app">Create the GitHub App {{if .Org}}for {{.Org}}{{else}}on your account{{end}}</button></p>
</form>
<p class="muted">GitHub: {{.WebURL}}. The link stays valid for an hour.</p>
{{end}}`))
	doneTemplate = template.Must(template.Must(template.New("done").Parse(layout)).Parse(`
{{define "title"}}perfgate is set up{{end}}
{{define "body"}}
<h1 id="done">{{if .Installed}}perfgate is installed{{else if .Fresh}}GitHub App created{{else}}perfgate is set up{{end}}</h1>
<p>GitHub App <strong id="slug">{{.Slug}}</strong> (ID <span id="app-id">{{.AppID}}</span>{{if .Owner}}, owned by {{.Owner}}{{end}}) is
{{if .Fresh}}created and perfgate is now serving its webhooks{{else}}configured{{end}}.</p>
{{if not .Installed}}<p>Next: install it on the repositories to gate{{if .HTMLURL}}: <a id="install" href="{{.HTMLURL}}/installations/new">{{.HTMLURL}}/installations/new</a>{{end}}.</p>{{end}}
<p>Then start a runner agent on the GPU host with the registration token from the server's data directory
(<code>agent-registration-token</code>): see the README's "Runner set-up".</p>
{{end}}`))
	errorTemplate = template.Must(template.Must(template.New("error").Parse(layout)).Parse(`
{{define "title"}}{{.Title}}{{end}}
{{define "body"}}<h1 id="error">{{.Title}}</h1><p>{{.Message}}</p>{{if .Back}}<p><a href="{{.Back}}">Back to the setup page</a></p>{{end}}{{end}}`))
)

func render(w http.ResponseWriter, status int, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
