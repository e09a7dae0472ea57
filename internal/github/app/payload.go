package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/go-github/v62/github"
)

// Webhook payloads as perfgate reads them. Each event decodes into its own
// narrow struct holding only the fields a handler uses, so a field perfgate
// does not read can never fail a delivery: GitHub's payloads carry
// hundreds of fields, some in older formats (check_run.app.created_at as
// "2018-04-25 20:42:10", integer timestamps in push payloads), some null,
// some added after this code was written. go-github's event types decode
// every field strictly and fail the whole delivery on one of them.

// hookEnvelope is what every event carries.
type hookEnvelope struct {
	Action       string            `json:"action"`
	Installation *hookInstallation `json:"installation"`
	Repository   hookRepo          `json:"repository"`
	Sender       hookUser          `json:"sender"`
}

// installationID is the event's installation, 0 when it names none (a
// repository or organisation webhook, not the App's).
func (e hookEnvelope) installationID() int64 {
	if e.Installation == nil {
		return 0
	}
	return e.Installation.ID
}

type hookInstallation struct {
	ID      int64    `json:"id"`
	Account hookUser `json:"account"`
}

type hookUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

type hookRepo struct {
	Name          string   `json:"name"`
	FullName      string   `json:"full_name"`
	DefaultBranch string   `json:"default_branch"`
	Owner         hookUser `json:"owner"`
}

// github is the repository as go-github's helpers (PreparePRContext,
// fetchPR) take it.
func (r hookRepo) github() *github.Repository {
	return &github.Repository{Name: github.String(r.Name), FullName: github.String(r.FullName),
		DefaultBranch: github.String(r.DefaultBranch), Owner: &github.User{Login: github.String(r.Owner.Login)}}
}

type hookPR struct {
	Number int      `json:"number"`
	Draft  bool     `json:"draft"`
	User   hookUser `json:"user"`
	Head   struct {
		SHA  string `json:"sha"`
		Repo *struct {
			FullName string `json:"full_name"`
		} `json:"repo"` // null when the fork was deleted
	} `json:"head"`
	Base struct {
		SHA string `json:"sha"`
		Ref string `json:"ref"`
	} `json:"base"`
}

// github is the pull request as targetOf reads it.
func (p hookPR) github() *github.PullRequest {
	pr := &github.PullRequest{Number: github.Int(p.Number), Draft: github.Bool(p.Draft), User: &github.User{Login: github.String(p.User.Login)},
		Head: &github.PullRequestBranch{SHA: github.String(p.Head.SHA)},
		Base: &github.PullRequestBranch{SHA: github.String(p.Base.SHA), Ref: github.String(p.Base.Ref)}}
	if p.Head.Repo != nil {
		pr.Head.Repo = &github.Repository{FullName: github.String(p.Head.Repo.FullName)}
	}
	return pr
}

type hookApp struct {
	ID int64 `json:"id"`
}

type hookPRRef struct {
	Number int `json:"number"`
}

type pullRequestEvent struct {
	hookEnvelope
	PullRequest hookPR `json:"pull_request"`
	Label       struct {
		Name string `json:"name"`
	} `json:"label"`
}

type pullRequestReviewEvent struct {
	hookEnvelope
	PullRequest hookPR `json:"pull_request"`
	Review      struct {
		State    string   `json:"state"`
		CommitID string   `json:"commit_id"`
		User     hookUser `json:"user"`
	} `json:"review"`
}

type issueCommentEvent struct {
	hookEnvelope
	Issue struct {
		Number int `json:"number"`
		// PullRequest is present (links) only on a pull request's
		// conversation; a plain issue has none, or null.
		PullRequest *struct{} `json:"pull_request"`
	} `json:"issue"`
	Comment struct {
		ID        int64    `json:"id"`
		Body      string   `json:"body"`
		HTMLURL   string   `json:"html_url"`
		User      hookUser `json:"user"`
		CreatedAt hookTime `json:"created_at"`
	} `json:"comment"`
}

type checkRunEvent struct {
	hookEnvelope
	CheckRun        hookCheckRun `json:"check_run"`
	RequestedAction struct {
		Identifier string `json:"identifier"`
	} `json:"requested_action"`
}

type hookCheckRun struct {
	Name         string      `json:"name"`
	HeadSHA      string      `json:"head_sha"`
	ExternalID   string      `json:"external_id"`
	App          hookApp     `json:"app"`
	PullRequests []hookPRRef `json:"pull_requests"`
}

type checkSuiteEvent struct {
	hookEnvelope
	CheckSuite struct {
		HeadSHA      string      `json:"head_sha"`
		App          hookApp     `json:"app"`
		PullRequests []hookPRRef `json:"pull_requests"`
	} `json:"check_suite"`
}

type mergeGroupEvent struct {
	hookEnvelope
	MergeGroup struct {
		HeadSHA string `json:"head_sha"`
		HeadRef string `json:"head_ref"`
		BaseSHA string `json:"base_sha"`
		BaseRef string `json:"base_ref"`
	} `json:"merge_group"`
}

type hookRepoName struct {
	FullName string `json:"full_name"`
}

type installationEvent struct {
	hookEnvelope
	Repositories []hookRepoName `json:"repositories"`
}

type installationRepositoriesEvent struct {
	hookEnvelope
	RepositoriesAdded   []hookRepoName `json:"repositories_added"`
	RepositoriesRemoved []hookRepoName `json:"repositories_removed"`
}

type releaseEvent struct {
	hookEnvelope
	Release struct {
		TagName         string `json:"tag_name"`
		TargetCommitish string `json:"target_commitish"`
	} `json:"release"`
}

// hookTime is a timestamp perfgate reads, in any form GitHub has sent one:
// RFC 3339, the older "2006-01-02 15:04:05" (UTC) and the same with a "T",
// or Unix seconds. null and "" are the zero time.
type hookTime struct{ time.Time }

var hookTimeLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04:05 -0700", "2006-01-02 15:04:05 MST"}

func (t *hookTime) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) || bytes.Equal(b, []byte(`""`)) {
		t.Time = time.Time{}
		return nil
	}
	if b[0] != '"' {
		secs, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return fmt.Errorf("timestamp %s: neither a string nor Unix seconds", b)
		}
		t.Time = time.Unix(secs, 0).UTC()
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timestamp %s: %w", b, err)
	}
	for _, layout := range hookTimeLayouts {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	return fmt.Errorf("timestamp %q: not RFC 3339, \"2006-01-02 15:04:05\" or Unix seconds", s)
}
