#!/usr/bin/env python3
"""Regenerates the webhook fixtures in this folder.

The shapes follow GitHub's published examples (octokit/webhooks
payload-examples/api.github.com/<event>/<action>.payload.json) with the
long URL-template sub-objects kept, so go-github's types see what GitHub
sends. Every fixture shares one world: repository acme/inference,
installation 4242, PR #17 by octocat. Run: python3 generate.py
"""
import copy
import json
import os

API = "https://api.github.com"
WEB = "https://github.com"
INSTALLATION_ID = 4242
APP_ID = 31337
REPO_ID = 700017
PR_NUMBER = 17
PR_ID = 1700017
HEAD_SHA = "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f"
NEW_HEAD_SHA = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"
BASE_SHA = "3d2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b1a0"
MERGE_GROUP_SHA = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f"
CHECK_RUN_ID = 9000017
TS = "2024-05-14T10:00:00Z"

USERS = {
    "octocat": (583231, "User"),
    "monalisa": (2154, "User"),
    "acme": (9000001, "Organization"),
    "forker": (7100001, "User"),
    "perfgate[bot]": (31337001, "Bot"),
    "dependabot[bot]": (49699333, "Bot"),
}


def user(login):
    uid, kind = USERS[login]
    u = f"{API}/users/{login}"
    return {
        "login": login,
        "id": uid,
        "node_id": f"MDQ6VXNlcj{uid}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
        "gravatar_id": "",
        "url": u,
        "html_url": f"{WEB}/{login}",
        "followers_url": f"{u}/followers",
        "following_url": f"{u}/following{{/other_user}}",
        "gists_url": f"{u}/gists{{/gist_id}}",
        "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{u}/subscriptions",
        "organizations_url": f"{u}/orgs",
        "repos_url": f"{u}/repos",
        "events_url": f"{u}/events{{/privacy}}",
        "received_events_url": f"{u}/received_events",
        "type": kind,
        "site_admin": False,
    }


def repository(owner="acme", name="inference", rid=REPO_ID, fork=False):
    full = f"{owner}/{name}"
    r = f"{API}/repos/{full}"
    return {
        "id": rid,
        "node_id": f"R_kgDOAKrS{rid}",
        "name": name,
        "full_name": full,
        "private": True,
        "owner": user(owner),
        "html_url": f"{WEB}/{full}",
        "description": "LLM inference engine",
        "fork": fork,
        "url": r,
        "forks_url": f"{r}/forks",
        "keys_url": f"{r}/keys{{/key_id}}",
        "collaborators_url": f"{r}/collaborators{{/collaborator}}",
        "teams_url": f"{r}/teams",
        "hooks_url": f"{r}/hooks",
        "issue_events_url": f"{r}/issues/events{{/number}}",
        "events_url": f"{r}/events",
        "assignees_url": f"{r}/assignees{{/user}}",
        "branches_url": f"{r}/branches{{/branch}}",
        "tags_url": f"{r}/tags",
        "blobs_url": f"{r}/git/blobs{{/sha}}",
        "git_tags_url": f"{r}/git/tags{{/sha}}",
        "git_refs_url": f"{r}/git/refs{{/sha}}",
        "trees_url": f"{r}/git/trees{{/sha}}",
        "statuses_url": f"{r}/statuses/{{sha}}",
        "languages_url": f"{r}/languages",
        "stargazers_url": f"{r}/stargazers",
        "contributors_url": f"{r}/contributors",
        "subscribers_url": f"{r}/subscribers",
        "subscription_url": f"{r}/subscription",
        "commits_url": f"{r}/commits{{/sha}}",
        "git_commits_url": f"{r}/git/commits{{/sha}}",
        "comments_url": f"{r}/comments{{/number}}",
        "issue_comment_url": f"{r}/issues/comments{{/number}}",
        "contents_url": f"{r}/contents/{{+path}}",
        "compare_url": f"{r}/compare/{{base}}...{{head}}",
        "merges_url": f"{r}/merges",
        "archive_url": f"{r}/{{archive_format}}{{/ref}}",
        "downloads_url": f"{r}/downloads",
        "issues_url": f"{r}/issues{{/number}}",
        "pulls_url": f"{r}/pulls{{/number}}",
        "milestones_url": f"{r}/milestones{{/number}}",
        "notifications_url": f"{r}/notifications{{?since,all,participating}}",
        "labels_url": f"{r}/labels{{/name}}",
        "releases_url": f"{r}/releases{{/id}}",
        "deployments_url": f"{r}/deployments",
        "created_at": "2023-01-10T09:00:00Z",
        "updated_at": TS,
        "pushed_at": TS,
        "git_url": f"git://github.com/{full}.git",
        "ssh_url": f"git@github.com:{full}.git",
        "clone_url": f"{WEB}/{full}.git",
        "svn_url": f"{WEB}/{full}",
        "homepage": None,
        "size": 4096,
        "stargazers_count": 0,
        "watchers_count": 0,
        "language": "Python",
        "has_issues": True,
        "has_projects": True,
        "has_downloads": True,
        "has_wiki": False,
        "has_pages": False,
        "forks_count": 1,
        "mirror_url": None,
        "archived": False,
        "disabled": False,
        "open_issues_count": 3,
        "license": None,
        "allow_forking": True,
        "is_template": False,
        "web_commit_signoff_required": False,
        "topics": [],
        "visibility": "private",
        "forks": 1,
        "open_issues": 3,
        "watchers": 0,
        "default_branch": "main",
    }


ORG = {
    "login": "acme",
    "id": 9000001,
    "node_id": "O_kgDOAIlUQQ",
    "url": f"{API}/orgs/acme",
    "repos_url": f"{API}/orgs/acme/repos",
    "events_url": f"{API}/orgs/acme/events",
    "hooks_url": f"{API}/orgs/acme/hooks",
    "issues_url": f"{API}/orgs/acme/issues",
    "members_url": f"{API}/orgs/acme/members{{/member}}",
    "public_members_url": f"{API}/orgs/acme/public_members{{/member}}",
    "avatar_url": "https://avatars.githubusercontent.com/u/9000001?v=4",
    "description": "Acme inference team",
}

INSTALLATION_REF = {"id": INSTALLATION_ID, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDI0Mg=="}


def label(name, lid, color="0e8a16", desc=""):
    return {
        "id": lid,
        "node_id": f"LA_kwDOAKrS{lid}",
        "url": f"{API}/repos/acme/inference/labels/{name}",
        "name": name,
        "color": color,
        "default": False,
        "description": desc,
    }


def pull_request(head_sha=HEAD_SHA, draft=False, fork=False, labels=None, updated=TS, closed=False):
    r = f"{API}/repos/acme/inference"
    head_owner = "forker" if fork else "acme"
    head_repo = repository(owner="forker", rid=7100017, fork=True) if fork else repository()
    return {
        "url": f"{r}/pulls/{PR_NUMBER}",
        "id": PR_ID,
        "node_id": "PR_kwDOAKrSzs4AGf8R",
        "html_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}",
        "diff_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}.diff",
        "patch_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}.patch",
        "issue_url": f"{r}/issues/{PR_NUMBER}",
        "number": PR_NUMBER,
        "state": "closed" if closed else "open",
        "locked": False,
        "title": "Fuse the attention softmax kernel",
        "user": user("octocat"),
        "body": "Fuses softmax into the attention kernel; should cut TTFT.",
        "created_at": TS,
        "updated_at": updated,
        "closed_at": updated if closed else None,
        "merged_at": None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [user("monalisa")],
        "requested_teams": [],
        "labels": labels or [],
        "milestone": None,
        "draft": draft,
        "commits_url": f"{r}/pulls/{PR_NUMBER}/commits",
        "review_comments_url": f"{r}/pulls/{PR_NUMBER}/comments",
        "review_comment_url": f"{r}/pulls/comments{{/number}}",
        "comments_url": f"{r}/issues/{PR_NUMBER}/comments",
        "statuses_url": f"{r}/statuses/{head_sha}",
        "head": {
            "label": f"{head_owner}:fused-softmax",
            "ref": "fused-softmax",
            "sha": head_sha,
            "user": user(head_owner),
            "repo": head_repo,
        },
        "base": {
            "label": "acme:main",
            "ref": "main",
            "sha": BASE_SHA,
            "user": user("acme"),
            "repo": repository(),
        },
        "_links": {
            "self": {"href": f"{r}/pulls/{PR_NUMBER}"},
            "html": {"href": f"{WEB}/acme/inference/pull/{PR_NUMBER}"},
            "issue": {"href": f"{r}/issues/{PR_NUMBER}"},
            "comments": {"href": f"{r}/issues/{PR_NUMBER}/comments"},
            "review_comments": {"href": f"{r}/pulls/{PR_NUMBER}/comments"},
            "review_comment": {"href": f"{r}/pulls/comments{{/number}}"},
            "commits": {"href": f"{r}/pulls/{PR_NUMBER}/commits"},
            "statuses": {"href": f"{r}/statuses/{head_sha}"},
        },
        "author_association": "CONTRIBUTOR" if fork else "MEMBER",
        "auto_merge": None,
        "active_lock_reason": None,
        "merged": False,
        "mergeable": None,
        "rebaseable": None,
        "mergeable_state": "unknown",
        "merged_by": None,
        "comments": 0,
        "review_comments": 0,
        "maintainer_can_modify": fork,
        "commits": 2,
        "additions": 120,
        "deletions": 48,
        "changed_files": 3,
    }


def envelope(body, sender="octocat"):
    body["repository"] = repository()
    body["organization"] = ORG
    body["sender"] = user(sender)
    body["installation"] = INSTALLATION_REF
    return body


def pr_event(action, sender="octocat", **kw):
    extra = kw.pop("extra", {})
    body = {"action": action, "number": PR_NUMBER, "pull_request": pull_request(**kw)}
    body.update(extra)
    return envelope(body, sender)


def issue_comment(comment_id, login, text, action="created", changes=None):
    r = f"{API}/repos/acme/inference"
    issue = {
        "url": f"{r}/issues/{PR_NUMBER}",
        "repository_url": r,
        "labels_url": f"{r}/issues/{PR_NUMBER}/labels{{/name}}",
        "comments_url": f"{r}/issues/{PR_NUMBER}/comments",
        "events_url": f"{r}/issues/{PR_NUMBER}/events",
        "html_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}",
        "id": 2300017,
        "node_id": "PR_kwDOAKrSzs4AGf8R",
        "number": PR_NUMBER,
        "title": "Fuse the attention softmax kernel",
        "user": user("octocat"),
        "labels": [],
        "state": "open",
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": 1,
        "created_at": TS,
        "updated_at": TS,
        "closed_at": None,
        "author_association": "MEMBER",
        "active_lock_reason": None,
        "draft": False,
        "pull_request": {
            "url": f"{r}/pulls/{PR_NUMBER}",
            "html_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}",
            "diff_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}.diff",
            "patch_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}.patch",
            "merged_at": None,
        },
        "body": "Fuses softmax into the attention kernel; should cut TTFT.",
        "reactions": reactions(f"{r}/issues/{PR_NUMBER}/reactions"),
        "timeline_url": f"{r}/issues/{PR_NUMBER}/timeline",
        "performed_via_github_app": None,
        "state_reason": None,
    }
    comment = {
        "url": f"{r}/issues/comments/{comment_id}",
        "html_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}#issuecomment-{comment_id}",
        "issue_url": f"{r}/issues/{PR_NUMBER}",
        "id": comment_id,
        "node_id": f"IC_kwDOAKrSzs{comment_id}",
        "user": user(login),
        "created_at": TS,
        "updated_at": TS,
        "author_association": "NONE" if login.endswith("[bot]") else "MEMBER",
        "body": text,
        "reactions": reactions(f"{r}/issues/comments/{comment_id}/reactions"),
        "performed_via_github_app": None,
    }
    body = {"action": action, "issue": issue, "comment": comment}
    if changes:
        body["changes"] = changes
    return envelope(body, login)


def reactions(url):
    return {"url": url, "total_count": 0, "+1": 0, "-1": 0, "laugh": 0, "hooray": 0,
            "confused": 0, "heart": 0, "rocket": 0, "eyes": 0}


def app():
    return {
        "id": APP_ID,
        "slug": "perfgate",
        "node_id": "A_kwDOAIlUQc4AAHpp",
        "owner": user("acme"),
        "name": "perfgate",
        "description": "Gates pull requests on LLM inference performance",
        "external_url": "https://perfgate.example.com",
        "html_url": f"{WEB}/apps/perfgate",
        "created_at": "2024-01-02T00:00:00Z",
        "updated_at": "2024-01-02T00:00:00Z",
        "permissions": {"checks": "write", "contents": "read", "issues": "write",
                        "metadata": "read", "pull_requests": "write"},
        "events": ["check_run", "check_suite", "issue_comment", "merge_group",
                   "pull_request", "pull_request_review", "release"],
    }


def pr_ref():
    r = f"{API}/repos/acme/inference"
    mini = {"id": REPO_ID, "url": r, "name": "inference"}
    return {
        "url": f"{r}/pulls/{PR_NUMBER}",
        "id": PR_ID,
        "number": PR_NUMBER,
        "head": {"ref": "fused-softmax", "sha": HEAD_SHA, "repo": mini},
        "base": {"ref": "main", "sha": BASE_SHA, "repo": mini},
    }


def suite_obj():
    """The check suite as a check_run event embeds it."""
    r = f"{API}/repos/acme/inference"
    return {
        "id": 8000017,
        "node_id": "CS_kwDOAKrSzs8AAAAB",
        "head_branch": "fused-softmax",
        "head_sha": HEAD_SHA,
        "status": "completed",
        "conclusion": "neutral",
        "url": f"{r}/check-suites/8000017",
        "before": BASE_SHA,
        "after": HEAD_SHA,
        "pull_requests": [pr_ref()],
        "app": app(),
        "created_at": TS,
        "updated_at": TS,
    }


def check_run(action, sender="octocat", requested_action=None):
    r = f"{API}/repos/acme/inference"
    run = {
        "id": CHECK_RUN_ID,
        "name": "perfgate / quick",
        "node_id": "CR_kwDOAKrSzs8AAAACIkJm",
        "head_sha": HEAD_SHA,
        "external_id": str(PR_NUMBER),
        "url": f"{r}/check-runs/{CHECK_RUN_ID}",
        "html_url": f"{WEB}/acme/inference/runs/{CHECK_RUN_ID}",
        "details_url": "https://perfgate.example.com/runs/17",
        "status": "completed",
        "conclusion": "neutral",
        "started_at": TS,
        "completed_at": "2024-05-14T10:12:00Z",
        "output": {
            "title": "TTFT p50 +8.1% (warning)",
            "summary": "Regression under the escalation threshold.",
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{r}/check-runs/{CHECK_RUN_ID}/annotations",
        },
        "check_suite": suite_obj(),
        "app": app(),
        "pull_requests": [pr_ref()],
    }
    body = {"action": action, "check_run": run}
    if requested_action:
        body["requested_action"] = {"identifier": requested_action}
    return envelope(body, sender)


def check_suite(action, sender="octocat"):
    # Shaped like octokit's check_suite/rerequested example: the suite, with
    # its app and pull requests, plus the usual envelope.
    r = f"{API}/repos/acme/inference"
    suite = suite_obj()
    suite.update({
        "rerequestable": True,
        "runs_rerequestable": True,
        "latest_check_runs_count": 1,
        "check_runs_url": f"{r}/check-suites/8000017/check-runs",
        "head_commit": {
            "id": HEAD_SHA,
            "tree_id": "7b3c1d9e0f2a4b6c8d0e1f3a5b7c9d1e3f5a7b9c",
            "message": "Fuse softmax into the attention kernel",
            "timestamp": TS,
            "author": {"name": "Octo Cat", "email": "octocat@github.com"},
            "committer": {"name": "Octo Cat", "email": "octocat@github.com"},
        },
    })
    return envelope({"action": action, "check_suite": suite}, sender)


def merge_group():
    body = {
        "action": "checks_requested",
        "merge_group": {
            "head_sha": MERGE_GROUP_SHA,
            "head_ref": f"refs/heads/gh-readonly-queue/main/pr-{PR_NUMBER}-{BASE_SHA}",
            "base_sha": BASE_SHA,
            "base_ref": "refs/heads/main",
            "head_commit": {
                "id": MERGE_GROUP_SHA,
                "tree_id": "0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6",
                "message": "Merge pull request #17 from acme/fused-softmax",
                "timestamp": TS,
                "author": {"name": "Octo Cat", "email": "octocat@example.com"},
                "committer": {"name": "GitHub", "email": "noreply@github.com"},
            },
        },
    }
    return envelope(body, "monalisa")


def review():
    r = f"{API}/repos/acme/inference"
    body = {
        "action": "submitted",
        "review": {
            "id": 1900017,
            "node_id": "PRR_kwDOAKrSzs5xAAAR",
            "user": user("monalisa"),
            "body": "Looks good; let's see the merge gate.",
            "commit_id": HEAD_SHA,
            "submitted_at": TS,
            "state": "approved",
            "html_url": f"{WEB}/acme/inference/pull/{PR_NUMBER}#pullrequestreview-1900017",
            "pull_request_url": f"{r}/pulls/{PR_NUMBER}",
            "author_association": "MEMBER",
            "_links": {
                "html": {"href": f"{WEB}/acme/inference/pull/{PR_NUMBER}#pullrequestreview-1900017"},
                "pull_request": {"href": f"{r}/pulls/{PR_NUMBER}"},
            },
        },
        "pull_request": pull_request(),
    }
    return envelope(body, "monalisa")


def installation_obj():
    return {
        "id": INSTALLATION_ID,
        "account": user("acme"),
        "repository_selection": "selected",
        "access_tokens_url": f"{API}/app/installations/{INSTALLATION_ID}/access_tokens",
        "repositories_url": f"{API}/installation/repositories",
        "html_url": f"{WEB}/organizations/acme/settings/installations/{INSTALLATION_ID}",
        "app_id": APP_ID,
        "app_slug": "perfgate",
        "target_id": 9000001,
        "target_type": "Organization",
        "permissions": {"checks": "write", "contents": "read", "issues": "write",
                        "metadata": "read", "pull_requests": "write"},
        "events": ["check_run", "check_suite", "issue_comment", "merge_group",
                   "pull_request", "pull_request_review", "release"],
        "created_at": TS,
        "updated_at": TS,
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None,
        "suspended_at": None,
    }


def mini_repo(name, rid):
    return {"id": rid, "node_id": f"R_kgDOAKrS{rid}", "name": name,
            "full_name": f"acme/{name}", "private": True}


def installation_created():
    return {
        "action": "created",
        "installation": installation_obj(),
        "repositories": [mini_repo("inference", REPO_ID)],
        "requester": None,
        "sender": user("monalisa"),
    }


def installation_repositories_added():
    return {
        "action": "added",
        "installation": installation_obj(),
        "repository_selection": "selected",
        "repositories_added": [mini_repo("tokenizer", 700018)],
        "repositories_removed": [],
        "requester": None,
        "sender": user("monalisa"),
    }


def release():
    r = f"{API}/repos/acme/inference"
    body = {
        "action": "published",
        "release": {
            "url": f"{r}/releases/6000017",
            "assets_url": f"{r}/releases/6000017/assets",
            "upload_url": f"https://uploads.github.com/repos/acme/inference/releases/6000017/assets{{?name,label}}",
            "html_url": f"{WEB}/acme/inference/releases/tag/v1.4.0",
            "id": 6000017,
            "author": user("monalisa"),
            "node_id": "RE_kwDOAKrSzs4AW8kR",
            "tag_name": "v1.4.0",
            "target_commitish": "main",
            "name": "v1.4.0",
            "draft": False,
            "prerelease": False,
            "created_at": TS,
            "published_at": TS,
            "assets": [],
            "tarball_url": f"{r}/tarball/v1.4.0",
            "zipball_url": f"{r}/zipball/v1.4.0",
            "body": "Fused softmax; 8% lower TTFT.",
        },
    }
    return envelope(body, "monalisa")


FIXTURES = {
    "pull_request/opened.json": pr_event("opened"),
    "pull_request/opened.draft.json": pr_event("opened", draft=True),
    "pull_request/opened.fork.json": pr_event("opened", fork=True, sender="forker"),
    "pull_request/synchronize.json": pr_event(
        "synchronize", head_sha=NEW_HEAD_SHA,
        extra={"before": HEAD_SHA, "after": NEW_HEAD_SHA}),
    "pull_request/reopened.json": pr_event("reopened"),
    "pull_request/ready_for_review.json": pr_event("ready_for_review"),
    "pull_request/closed.json": pr_event("closed", closed=True, updated="2026-12-03T10:15:00Z"),
    "pull_request/labeled.json": pr_event(
        "labeled", sender="monalisa",
        labels=[label("perfgate/merge-gate", 5100017)],
        extra={"label": label("perfgate/merge-gate", 5100017)}),
    "pull_request_review/submitted.approved.json": review(),
    "issue_comment/created.retest.json": issue_comment(1000001, "monalisa", "/perf retest"),
    "issue_comment/created.retest_merge.json": issue_comment(1000002, "monalisa", "Looks noisy.\r\n/perf retest merge"),
    "issue_comment/created.appeal.json": issue_comment(
        1000003, "octocat", "/perf appeal the +8% TTFT is the new prefix cache warming; steady state is faster"),
    "issue_comment/created.appeal_accept.json": issue_comment(1000004, "monalisa", "/perf appeal accept"),
    "issue_comment/created.appeal_reject.json": issue_comment(1000005, "monalisa", "/perf appeal reject warm-up is part of the SLO"),
    "issue_comment/created.help.json": issue_comment(1000006, "octocat", "/perf help"),
    "issue_comment/created.unknown.json": issue_comment(1000007, "octocat", "/perf benchmark everything"),
    "issue_comment/created.bot.json": issue_comment(1000008, "perfgate[bot]", "/perf retest"),
    "issue_comment/edited.retest.json": issue_comment(
        1000001, "monalisa", "/perf retest", action="edited",
        changes={"body": {"from": "/perf retset"}}),
    "check_run/rerequested.json": check_run("rerequested"),
    "check_run/requested_action.retest.json": check_run("requested_action", "monalisa", "retest"),
    "check_run/requested_action.appeal.json": check_run("requested_action", "octocat", "appeal"),
    "check_suite/rerequested.json": check_suite("rerequested", "monalisa"),
    "merge_group/checks_requested.json": merge_group(),
    "installation/created.json": installation_created(),
    "installation_repositories/added.json": installation_repositories_added(),
    "release/published.json": release(),
}


# published/: the shapes GitHub's published examples (octokit/webhooks
# payload-examples) exercise beyond the fixtures above, in this world: a
# delivery with no installation (a repository or organisation webhook),
# the older "2018-04-25 20:42:10" timestamp and integer timestamps, nulls
# and fields perfgate has never heard of in places it does not read,
# comments on plain issues, check runs and suites of other apps, push, and
# a release on a repository without .github/perfgate.yml. Replayed through
# the server by internal/github/server's TestPublishedShapes.
OLD_TS = "2018-04-25 20:42:10"
ISSUE_NUMBER = 3


def other_app():
    """Another app, as GitHub's check_run examples show theirs."""
    return {
        "id": 2,
        "slug": "super-duper",
        "node_id": "MDExOkludGVncmF0aW9uMQ==",
        "owner": user("acme"),
        "name": "Super Duper",
        "description": None,
        "external_url": "http://super-duper.example.com",
        "html_url": f"{WEB}/apps/super-duper",
        "created_at": OLD_TS,
        "updated_at": OLD_TS,
    }


def old_timestamps(a):
    a = copy.deepcopy(a)
    a["created_at"] = OLD_TS
    a["updated_at"] = OLD_TS
    return a


def without_installation(body):
    body = copy.deepcopy(body)
    del body["installation"]
    return body


def odd_fields(body):
    """Nulls, integer timestamps and unknown fields where perfgate reads nothing."""
    body = copy.deepcopy(body)
    body["repository"]["created_at"] = 1525286400
    body["repository"]["pushed_at"] = 1714989600
    body["repository"]["license"] = {"key": "apache-2.0", "name": "Apache License 2.0", "spdx_id": "Apache-2.0", "url": None, "node_id": "MDc6TGljZW5zZTI="}
    body["repository"]["custom_properties"] = {"team": None, "tier": ["gpu", 1]}
    body["sender"]["user_view_type"] = "public"
    body["a_field_from_the_future"] = {"nested": [1, "two", None, {"created_at": OLD_TS}]}
    if "pull_request" in body and "created_at" in body["pull_request"]:
        body["pull_request"]["created_at"] = OLD_TS  # updated_at orders the inbox: left as GitHub sends it
        body["pull_request"]["milestone"] = None
        body["pull_request"]["requested_teams"] = None
    if "review" in body:
        body["review"]["submitted_at"] = OLD_TS
    return body


def own_rerequested_old_app():
    """perfgate's own run re-requested, its app dated the old way (both
    check_run/rerequested examples carry check_run.app.created_at so)."""
    body = check_run("rerequested", "monalisa")
    body["check_run"]["app"] = old_timestamps(body["check_run"]["app"])
    body["check_run"]["check_suite"]["app"] = old_timestamps(body["check_run"]["check_suite"]["app"])
    body["check_run"]["output"]["text"] = None
    return body


def other_app_check_run(action, sender="octocat", requested_action=None):
    body = check_run(action, sender, requested_action)
    run = body["check_run"]
    run.update({"name": "randscape", "external_id": "", "details_url": None, "app": other_app(), "pull_requests": []})
    run["check_suite"]["app"] = other_app()
    run["check_suite"]["pull_requests"] = []
    run["output"] = {"title": "Report", "summary": "It's all good.", "text": None, "annotations_count": 2,
                     "annotations_url": run["output"]["annotations_url"]}
    if action == "created":
        run.update({"status": "queued", "conclusion": None, "completed_at": None})
    return body


def other_app_check_suite(action, with_prs=False):
    body = check_suite(action)
    suite = body["check_suite"]
    suite["app"] = other_app()
    if not with_prs:
        suite["pull_requests"] = []
    if action == "requested":
        suite.update({"status": "queued", "conclusion": None})
    return body


def plain_issue_comment(comment_id, login, text, action="created"):
    body = issue_comment(comment_id, login, text, action=action)
    issue = body["issue"]
    del issue["pull_request"]
    del issue["draft"]
    url = f"{API}/repos/acme/inference/issues/{ISSUE_NUMBER}"
    issue.update({"number": ISSUE_NUMBER, "url": url, "html_url": f"{WEB}/acme/inference/issues/{ISSUE_NUMBER}",
                  "title": "Prefix cache hit rate drops after restart", "labels": None, "body": None})
    body["comment"]["issue_url"] = url
    body["comment"]["html_url"] = f"{WEB}/acme/inference/issues/{ISSUE_NUMBER}#issuecomment-{comment_id}"
    return body


def comment_with_old_dates():
    """A /perf retest on the PR, dated the old way where perfgate only
    logs, with another app's performed_via_github_app."""
    body = issue_comment(1000031, "monalisa", "/perf retest")
    body["comment"]["updated_at"] = OLD_TS
    body["comment"]["performed_via_github_app"] = other_app()
    body["issue"]["created_at"] = OLD_TS
    body["issue"]["milestone"] = None
    body["issue"]["pull_request"]["merged_at"] = None
    return odd_fields(body)


def push(with_installation=True):
    commit = {
        "id": NEW_HEAD_SHA,
        "tree_id": "7b3c1d9e0f2a4b6c8d0e1f3a5b7c9d1e3f5a7b9c",
        "distinct": True,
        "message": "Fuse softmax into the attention kernel",
        "timestamp": "2019-05-15T15:20:30-07:00",
        "url": f"{WEB}/acme/inference/commit/{NEW_HEAD_SHA}",
        "author": {"name": "Octo Cat", "email": "octocat@github.com", "username": "octocat"},
        "committer": {"name": "GitHub", "email": "noreply@github.com", "username": "web-flow"},
        "added": [], "removed": [], "modified": ["model/attention.py"],
    }
    repo = repository()
    repo.update({"created_at": 1557933565, "pushed_at": 1557933657, "stargazers": 0, "master_branch": "main"})
    body = {
        "ref": "refs/heads/fused-softmax",
        "before": HEAD_SHA,
        "after": NEW_HEAD_SHA,
        "repository": repo,
        "pusher": {"name": "octocat", "email": "octocat@github.com"},
        "organization": ORG,
        "sender": user("octocat"),
        "created": False, "deleted": False, "forced": False, "base_ref": None,
        "compare": f"{WEB}/acme/inference/compare/{HEAD_SHA[:12]}...{NEW_HEAD_SHA[:12]}",
        "commits": [commit],
        "head_commit": commit,
    }
    if with_installation:
        body["installation"] = INSTALLATION_REF
    return body


def release_without_config(action="published"):
    body = release()
    body["action"] = action
    body["repository"] = repository(name="tokenizer", rid=700018)
    rel = body["release"]
    rel.update({"tag_name": "v0.3.0", "name": None, "body": None, "target_commitish": "main",
                "url": f"{API}/repos/acme/tokenizer/releases/6000018", "id": 6000018})
    if action == "created":
        rel.update({"draft": True, "published_at": None})
    return body


def installation_dated_by_integers(action):
    body = installation_created()
    body["action"] = action
    inst = body["installation"]
    inst.update({"created_at": 1501449845, "updated_at": 1501449845})
    if action == "new_permissions_accepted":
        body["repositories"] = None
    return body


PUBLISHED = {
    # No installation: a repository or organisation webhook pointed at
    # perfgate. Every one is ignored with one log line.
    "published/pull_request/opened.no_installation.json": without_installation(pr_event("opened")),
    "published/pull_request/synchronize.no_installation.json": without_installation(pr_event(
        "synchronize", head_sha=NEW_HEAD_SHA, extra={"before": HEAD_SHA, "after": NEW_HEAD_SHA})),
    "published/pull_request/closed.no_installation.json": without_installation(
        pr_event("closed", closed=True, updated="2026-12-03T10:15:00Z")),
    "published/pull_request_review/submitted.no_installation.json": without_installation(review()),
    "published/issue_comment/created.retest.no_installation.json": without_installation(
        issue_comment(1000021, "monalisa", "/perf retest")),
    "published/check_run/rerequested.no_installation.json": without_installation(own_rerequested_old_app()),
    "published/check_suite/rerequested.no_installation.json": without_installation(check_suite("rerequested", "monalisa")),
    "published/merge_group/checks_requested.no_installation.json": without_installation(merge_group()),
    "published/release/published.no_installation.json": without_installation(release()),
    # Old timestamps, nulls and unknown fields where perfgate reads nothing:
    # each is acted on as its ordinary twin is.
    "published/check_run/rerequested.old_timestamps.json": own_rerequested_old_app(),
    "published/pull_request/opened.odd_fields.json": odd_fields(pr_event("opened")),
    "published/pull_request_review/submitted.odd_fields.json": odd_fields(review()),
    "published/issue_comment/created.retest.odd_fields.json": comment_with_old_dates(),
    # Comments on a plain issue: chatter is ignored, a PR command is
    # answered that it needs a pull request.
    "published/issue_comment/created.plain_issue.json": plain_issue_comment(1000022, "octocat", "Seen it too after a restart; hit rate 12% -> 3%."),
    "published/issue_comment/created.plain_issue.retest.json": plain_issue_comment(1000023, "monalisa", "/perf retest"),
    "published/issue_comment/edited.plain_issue.json": plain_issue_comment(1000022, "octocat", "Seen it too.", action="edited"),
    "published/issue_comment/deleted.plain_issue.json": plain_issue_comment(1000022, "octocat", "Seen it too.", action="deleted"),
    # Other apps' check runs and suites: never perfgate's to act on.
    "published/check_run/created.other_app.json": other_app_check_run("created"),
    "published/check_run/completed.other_app.json": other_app_check_run("completed"),
    "published/check_run/rerequested.other_app.json": other_app_check_run("rerequested"),
    "published/check_run/requested_action.other_app.json": other_app_check_run("requested_action", "monalisa", "import"),
    "published/check_suite/requested.other_app.json": other_app_check_suite("requested"),
    "published/check_suite/completed.other_app.json": other_app_check_suite("completed"),
    "published/check_suite/rerequested.other_app.json": other_app_check_suite("rerequested", with_prs=True),
    # Events perfgate does not subscribe to (push), with integer timestamps.
    "published/push/branch.json": push(),
    "published/push/branch.no_installation.json": push(with_installation=False),
    # A release on a repository without .github/perfgate.yml.
    "published/release/published.no_config.json": release_without_config(),
    "published/release/created.no_config.json": release_without_config("created"),
    # Installation events dated by integers, one with repositories null.
    "published/installation/new_permissions_accepted.json": installation_dated_by_integers("new_permissions_accepted"),
    "published/installation/deleted.json": installation_dated_by_integers("deleted"),
}
FIXTURES.update(PUBLISHED)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for rel, body in FIXTURES.items():
        path = os.path.join(here, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(body, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
