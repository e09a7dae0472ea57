package setup

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
)

type pageData struct {
	Prefix, Org, Name, PublicURL, WebURL string
}

type confirmData struct {
	Prefix, Action, Manifest, Org, Name, WebURL string
}

type doneData struct {
	Credentials
	Fresh, Installed bool
	Prefix           string
}

type errorData struct {
	Title, Message, Back string
}

// The button's words for each owner, kept here once: the page renders
// them for the owner it was opened with and the script swaps them as the
// owner field changes ("%s" is the organisation).
const (
	buttonUser = "Create the GitHub App on your personal account"
	buttonOrg  = "Create the GitHub App for the organisation %s"
	noteUser   = "The app will belong to the GitHub account you are signed in as. For an organisation, type its name above."
	noteOrg    = "The app will belong to the organisation %s: you must be one of its owners."
)

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
	pageTemplate = template.Must(template.Must(template.New("page").Funcs(template.FuncMap{"owner": ownerWords}).Parse(layout)).Parse(`
{{define "title"}}Set up perfgate{{end}}
{{define "body"}}
<h1>Set up perfgate</h1>
<p>perfgate has no GitHub App yet. The button below sends perfgate's manifest to GitHub, which creates
the app with perfgate's events and permissions and its webhook pointing at <code>{{.PublicURL}}</code>,
then sends you back here. perfgate stores the app's ID, private key and webhook secret and starts.</p>
<form method="post" action="{{.Prefix}}/setup/create" id="create">
<p><label for="org">Organisation that will own the app (leave empty for your personal account):</label><br>
<input id="org" name="org" value="{{.Org}}" placeholder="my-org" autocomplete="off" pattern="[A-Za-z0-9](-?[A-Za-z0-9])*" maxlength="39"></p>
<p><label for="name">App name (unique across GitHub; you can rename the app later in its settings):</label><br>
<input id="name" name="name" value="{{.Name}}" required maxlength="34"></p>
<p id="owner-note" data-user="{{owner "noteUser" ""}}" data-org="{{owner "noteOrg" ""}}">{{if .Org}}{{owner "noteOrg" .Org}}{{else}}{{owner "noteUser" ""}}{{end}}</p>
<p><button type="submit" id="create-app" data-user="{{owner "buttonUser" ""}}" data-org="{{owner "buttonOrg" ""}}">{{if .Org}}{{owner "buttonOrg" .Org}}{{else}}{{owner "buttonUser" ""}}{{end}}</button></p>
</form>
<p class="muted">GitHub: {{.WebURL}}. The next page asks you to confirm the owner before anything is sent to GitHub.</p>
<script src="{{.Prefix}}/setup/setup.js"></script>
{{end}}`))
	confirmTemplate = template.Must(template.Must(template.New("confirm").Parse(layout)).Parse(`
{{define "title"}}Confirm the app's owner{{end}}
{{define "body"}}
<h1 id="confirm">{{if .Org}}Create {{.Name}} for the organisation {{.Org}}{{else}}Create {{.Name}} on your personal account{{end}}</h1>
<p id="owner">Owner: {{if .Org}}<strong>the organisation {{.Org}}</strong> (you must be one of its owners){{else}}<strong>your personal account</strong> on {{.WebURL}}, whichever account you are signed in as{{end}}.
App name: <strong>{{.Name}}</strong>.</p>
<form method="post" action="{{.Action}}" id="github">
<input type="hidden" name="manifest" value="{{.Manifest}}">
<p><button type="submit" id="continue">Continue to GitHub</button> <a href="{{.Prefix}}/setup{{if .Org}}?org={{.Org}}{{end}}" id="change">Change the owner or name</a></p>
</form>
<p class="muted">GitHub then shows the app it is about to create; confirm there. The link stays valid for an hour.</p>
{{end}}`))
	doneTemplate = template.Must(template.Must(template.New("done").Parse(layout)).Parse(`
{{define "title"}}perfgate is set up{{end}}
{{define "body"}}
<h1 id="done">{{if .Installed}}perfgate is installed{{else if .Fresh}}GitHub App created{{else}}perfgate is set up{{end}}</h1>
<p>GitHub App <strong id="slug">{{.Slug}}</strong> (ID <span id="app-id">{{.AppID}}</span>{{if .Owner}}, owned by {{.Owner}}{{end}}) is
{{if .Fresh}}created and perfgate is now serving its webhooks{{else}}configured{{end}}.</p>
{{if not .Installed}}<p>Next: install it on the repositories to gate{{if .HTMLURL}}: <a id="install" href="{{.HTMLURL}}/installations/new">{{.HTMLURL}}/installations/new</a>{{end}}.</p>{{end}}
<p>To rename the app, use its settings on GitHub (App settings → Display information); perfgate keeps working, it knows the app by its ID.</p>
<p>Then start a runner agent on the GPU host with the registration token from the server's data directory
(<code>agent-registration-token</code>): see "Runner set-up" in docs/install.md.</p>
{{end}}`))
	errorTemplate = template.Must(template.Must(template.New("error").Parse(layout)).Parse(`
{{define "title"}}{{.Title}}{{end}}
{{define "body"}}<h1 id="error">{{.Title}}</h1><p>{{.Message}}</p>{{if .Back}}<p><a href="{{.Back}}">Back to the setup page</a></p>{{end}}{{end}}`))
)

// ownerWords fills one of the button's or note's wordings; with org "" the
// organisation's wordings keep their {org} placeholder for the script.
func ownerWords(which, org string) string {
	if org == "" {
		org = "{org}"
	}
	switch which {
	case "buttonUser":
		return buttonUser
	case "buttonOrg":
		return fmt.Sprintf(buttonOrg, org)
	case "noteUser":
		return noteUser
	case "noteOrg":
		return fmt.Sprintf(noteOrg, org)
	}
	return ""
}

// setupScript rewords the create button and the owner note as the
// organisation field changes, so the button always says where the app
// will land. Without it the page still works: the confirmation page names
// the owner the server received.
const setupScript = `(function () {
  var org = document.getElementById("org");
  var parts = [document.getElementById("create-app"), document.getElementById("owner-note")];
  if (!org) { return; }
  function update() {
    var v = org.value.trim();
    parts.forEach(function (el) {
      if (!el) { return; }
      el.textContent = v ? el.dataset.org.split("{org}").join(v) : el.dataset.user;
    });
  }
  org.addEventListener("input", update);
  update();
})();
`

func script(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	_, _ = w.Write([]byte(setupScript))
}

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
