// Package command parses `/perf …` pull request comments.
//
// Parsing follows Atlantis: Parse returns one of three outcomes — a command
// to run, a reply to post (bad usage, unknown subcommand), or nothing at all
// for comments that are not addressed to perfgate. The command table below
// drives parsing, the permission each command needs and the help text, so
// the three cannot drift apart.
package command

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Prefix is the word that addresses perfgate at the start of a comment line.
const Prefix = "/perf"

// MaxReasonLen caps an appeal or rejection reason, in characters. Reasons are
// echoed into PR comments and the audit log; a paragraph is plenty.
const MaxReasonLen = 500

// Kind names a command.
type Kind string

// The commands perfgate understands.
const (
	Retest       Kind = "retest"
	Appeal       Kind = "appeal"
	AppealAccept Kind = "appeal accept"
	AppealReject Kind = "appeal reject"
	Ack          Kind = "ack"
	Approve      Kind = "approve"
	Help         Kind = "help"
	Profile      Kind = "profile"
	Bisect       Kind = "bisect"
	RootCause    Kind = "rootcause"
	Capacity     Kind = "capacity"
	Soak         Kind = "soak"
)

// Permission is what the commenter must hold for a command to run.
type Permission string

const (
	// Anyone may run the command.
	Anyone Permission = "anyone"
	// Write needs the write role (or above) on the repository.
	Write Permission = "write"
	// Maintain needs the maintain or admin role.
	Maintain Permission = "maintain"
	// AuthorOrWrite is satisfied by the pull request's author or by write.
	AuthorOrWrite Permission = "author-or-write"
)

// Tier is a benchmark tier that a retest may ask for.
type Tier string

const (
	TierQuick Tier = "quick"
	TierMerge Tier = "merge"
)

// Command is a parsed, valid command.
type Command struct {
	Kind       Kind
	Tier       Tier   // Retest only; TierQuick when omitted
	Reason     string // Appeal (required), AppealReject and Ack (optional); RootCause: the cause
	Good, Bad  string // Bisect: the commits (SHAs or refs), good first
	Fix        string // RootCause: the fix's link (a URL or #N), optional
	SHA        string // Approve: the commit the approver reviewed (7 to 40 hex digits, lower case)
	Permission Permission
}

// Action says what the caller should do with an Outcome.
type Action int

const (
	// Ignore: the comment is not a perfgate command; do nothing.
	Ignore Action = iota
	// Run: Outcome.Command is valid; check permission, then act.
	Run
	// Reply: the comment addressed perfgate but was not valid; post
	// Outcome.Reply and do nothing else.
	Reply
)

// Outcome is the result of parsing one comment.
type Outcome struct {
	Action  Action
	Command Command
	Reply   string
}

// spec is one row of the command table.
type spec struct {
	kind       Kind
	usage      string
	summary    string
	permission Permission
	// parse receives the words after the command's own words and the raw
	// remainder of the line (for free-text reasons).
	parse func(args []string, rest string) (Command, error)
}

// table is the single source of truth for commands, in help order. Longer
// word sequences come first so "appeal accept" wins over "appeal <reason>".
var table = []spec{
	{
		kind:       Retest,
		usage:      "/perf retest [quick|merge]",
		summary:    "re-run the benchmark tier on the PR's head commit (default quick)",
		permission: Write,
		parse: func(args []string, _ string) (Command, error) {
			switch {
			case len(args) == 0:
				return Command{Tier: TierQuick}, nil
			case len(args) == 1 && (args[0] == string(TierQuick) || args[0] == string(TierMerge)):
				return Command{Tier: Tier(args[0])}, nil
			case len(args) == 1:
				return Command{}, fmt.Errorf("unknown tier %q: use quick or merge", args[0])
			default:
				return Command{}, fmt.Errorf("retest takes at most one tier, got %d words", len(args))
			}
		},
	},
	{
		kind:       AppealAccept,
		usage:      "/perf appeal accept",
		summary:    "maintainers: accept the open appeal (the regression is recorded, the baseline does not move)",
		permission: Maintain,
		parse: func(args []string, _ string) (Command, error) {
			if len(args) != 0 {
				return Command{}, fmt.Errorf("appeal accept takes no arguments")
			}
			return Command{}, nil
		},
	},
	{
		kind:       AppealReject,
		usage:      "/perf appeal reject [reason]",
		summary:    "maintainers: reject the open appeal, optionally saying why",
		permission: Maintain,
		parse: func(_ []string, rest string) (Command, error) {
			reason, err := checkReason(rest, false)
			return Command{Reason: reason}, err
		},
	},
	{
		kind:       Appeal,
		usage:      "/perf appeal <reason>",
		summary:    "PR author or writers: contest a regression; the reason is recorded and the PR re-tested",
		permission: AuthorOrWrite,
		parse: func(_ []string, rest string) (Command, error) {
			reason, err := checkReason(rest, true)
			return Command{Reason: reason}, err
		},
	},
	{
		kind:       Profile,
		usage:      "/perf profile",
		summary:    "profile the PR's base and head (a short run with the engine's profiler) and post where the time went",
		permission: Write,
		parse: func(args []string, _ string) (Command, error) {
			if len(args) != 0 {
				return Command{}, fmt.Errorf("profile takes no arguments")
			}
			return Command{}, nil
		},
	},
	{
		kind:       Capacity,
		usage:      "/perf capacity",
		summary:    "maintainers: sweep the PR's base and head to their capacity knees (the config's `capacity:` tier) as the `perfgate / capacity` check",
		permission: Maintain,
		parse:      noArgs("capacity"),
	},
	{
		kind:       Soak,
		usage:      "/perf soak",
		summary:    "maintainers: soak the PR's head under a steady load (the config's `soak:` tier) as the `perfgate / soak` check",
		permission: Maintain,
		parse:      noArgs("soak"),
	},
	{
		kind:       Bisect,
		usage:      "/perf bisect <good> <bad>",
		summary:    "maintainers: find the commit between two commits (SHAs, tags or branches) that changed performance, on the quick tier",
		permission: Maintain,
		parse:      parseBisect,
	},
	{
		kind:       RootCause,
		usage:      "/perf rootcause <cause> [fix <link>]",
		summary:    "maintainers: record why this regression happened (and its fix) in the knowledge base, so a repeat is recognised",
		permission: Maintain,
		parse:      parseRootCause,
	},
	{
		kind:       Ack,
		usage:      "/perf ack [reason]",
		summary:    "maintainers: let an inconclusive check that needs acknowledgement pass (recorded in the audit log)",
		permission: Maintain,
		parse: func(_ []string, rest string) (Command, error) {
			reason, err := checkReason(rest, false)
			return Command{Reason: reason}, err
		},
	},
	{
		kind:       Approve,
		usage:      "/perf approve <sha>",
		summary:    "run a fork's commit on the runners after reviewing it; a new push needs a new approval (`triggers.forks: maintainer` asks maintain or admin)",
		permission: Write,
		parse: func(args []string, _ string) (Command, error) {
			if len(args) != 1 {
				return Command{}, fmt.Errorf("name the commit you reviewed, e.g. `/perf approve 1a2b3c4`")
			}
			sha := strings.ToLower(args[0])
			if !isSHA(sha) {
				return Command{}, fmt.Errorf("%q is not a commit SHA (7 to 40 hex digits)", args[0])
			}
			return Command{SHA: sha}, nil
		},
	},
	{
		kind:       Help,
		usage:      "/perf help",
		summary:    "show this list",
		permission: Anyone,
		parse: func(args []string, _ string) (Command, error) {
			if len(args) != 0 {
				return Command{}, fmt.Errorf("help takes no arguments")
			}
			return Command{}, nil
		},
	},
}

// Parse reads a comment body. Only the first line that begins with /perf
// counts; quoted lines ("> /perf …") and fenced or indented code are skipped
// so that quoting someone's command does not run it again.
func Parse(body string) Outcome {
	line, ok := commandLine(body)
	if !ok {
		return Outcome{Action: Ignore}
	}
	words := strings.Fields(line)
	if len(words) == 1 {
		return replyf("`%s` needs a command.", Prefix)
	}
	for _, s := range table {
		kw := strings.Fields(string(s.kind))
		if len(words)-1 < len(kw) || !equalWords(words[1:1+len(kw)], kw) {
			continue
		}
		rest := restAfter(line, 1+len(kw))
		cmd, err := s.parse(words[1+len(kw):], rest)
		if err != nil {
			return replyf("`%s`: %v.", s.usage, err)
		}
		cmd.Kind = s.kind
		cmd.Permission = s.permission
		return Outcome{Action: Run, Command: cmd}
	}
	return replyf("Unknown command `%s %s`.", Prefix, words[1])
}

// HelpText lists every command with its usage, purpose and permission.
func HelpText() string {
	var b strings.Builder
	b.WriteString("perfgate commands (comment on the pull request, one per comment):\n\n")
	b.WriteString("| Command | What it does | Who may run it |\n|---|---|---|\n")
	for _, s := range table {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", cell(s.usage), cell(s.summary), cell(permissionText(s.permission)))
	}
	return b.String()
}

// cell escapes a table cell: in GitHub's markdown a "|" ends the cell even
// inside a code span (`[quick|merge]`) unless it is written "\|".
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// PermissionFor returns the permission a command kind needs.
func PermissionFor(k Kind) Permission {
	for _, s := range table {
		if s.kind == k {
			return s.permission
		}
	}
	// Unknown kinds are not in the table; demand the most.
	return Maintain
}

func permissionText(p Permission) string {
	switch p {
	case Write:
		return "write access"
	case Maintain:
		return "maintain or admin"
	case AuthorOrWrite:
		return "the PR author, or write access"
	default:
		return "anyone"
	}
}

func replyf(format string, args ...any) Outcome {
	return Outcome{Action: Reply, Reply: fmt.Sprintf(format, args...) + "\n\n" + HelpText()}
}

// commandLine finds the first line addressed to perfgate outside quotes and
// code. Markdown allows up to three spaces of indentation before a line
// stops being a paragraph and becomes code.
func commandLine(body string) (string, bool) {
	inFence := false
	fence := ""
	for _, raw := range strings.Split(body, "\n") {
		raw = strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimLeft(raw, " ")
		indent := len(raw) - len(trimmed)
		if inFence {
			if strings.HasPrefix(trimmed, fence) && indent < 4 {
				inFence = false
			}
			continue
		}
		if indent < 4 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			inFence, fence = true, trimmed[:3]
			continue
		}
		if indent >= 4 || strings.HasPrefix(raw, "\t") {
			continue
		}
		if trimmed == Prefix || strings.HasPrefix(trimmed, Prefix+" ") || strings.HasPrefix(trimmed, Prefix+"\t") {
			return trimmed, true
		}
	}
	return "", false
}

// restAfter returns the text of line after its first n words, trimmed, with
// the inner spacing of a free-text reason kept as the author wrote it.
func restAfter(line string, n int) string {
	s := line
	for i := 0; i < n; i++ {
		s = strings.TrimLeft(s, " \t")
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			return ""
		}
		s = s[end:]
	}
	return strings.TrimSpace(s)
}

// commitish is a SHA (7–40 hex digits) or a tag or branch name; it never
// starts with "-", so it cannot become an option of a git command.
var commitish = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}$`)

func parseBisect(args []string, _ string) (Command, error) {
	if len(args) == 1 && strings.Contains(args[0], "..") {
		return Command{}, fmt.Errorf("give the two commits separated by a space, good first: `/perf bisect %s`",
			strings.NewReplacer("...", " ", "..", " ").Replace(args[0]))
	}
	if len(args) != 2 {
		return Command{}, fmt.Errorf("bisect takes two commits, the good one first, e.g. `/perf bisect v0.26.0 main`; got %d", len(args))
	}
	for _, a := range args {
		if !commitish.MatchString(a) || strings.Contains(a, "..") || strings.HasSuffix(a, "/") || strings.HasSuffix(a, ".lock") {
			return Command{}, fmt.Errorf("%q is not a commit: give a SHA, a tag or a branch name", a)
		}
	}
	if args[0] == args[1] {
		return Command{}, fmt.Errorf("the good and bad commits are both %q: give two different commits", args[0])
	}
	return Command{Good: args[0], Bad: args[1]}, nil
}

// fixLink is a trailing "fix <link>" of a root cause: a URL or #N.
var fixLink = regexp.MustCompile(`(?i)\s+fix:?\s+(https?://\S+|#[0-9]+)$`)

func parseRootCause(_ []string, rest string) (Command, error) {
	cause, fix := rest, ""
	if m := fixLink.FindStringSubmatchIndex(" " + rest); m != nil {
		cause, fix = strings.TrimSpace((" " + rest)[:m[0]]), (" " + rest)[m[2]:m[3]]
	}
	if cause == "" {
		return Command{}, fmt.Errorf("say what caused the regression, e.g. `/perf rootcause scheduler priority change fix #130`")
	}
	if n := utf8.RuneCountInString(cause); n > MaxReasonLen {
		return Command{}, fmt.Errorf("the cause is %d characters; keep it under %d", n, MaxReasonLen)
	}
	return Command{Reason: cause, Fix: fix}, nil
}

func checkReason(reason string, required bool) (string, error) {
	if required && reason == "" {
		return "", fmt.Errorf("a reason is required, e.g. `/perf appeal the slowdown is the new warm-up`")
	}
	if n := utf8.RuneCountInString(reason); n > MaxReasonLen {
		return "", fmt.Errorf("the reason is %d characters; keep it under %d", n, MaxReasonLen)
	}
	return reason, nil
}

// isSHA reports whether s is a commit SHA or a prefix of one that git
// would show (7 to 40 hex digits).
func isSHA(s string) bool {
	if len(s) < 7 || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func equalWords(a, b []string) bool {
	for i := range b {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// noArgs parses a command that takes no arguments.
func noArgs(name string) func([]string, string) (Command, error) {
	return func(args []string, _ string) (Command, error) {
		if len(args) != 0 {
			return Command{}, fmt.Errorf("%s takes no arguments", name)
		}
		return Command{}, nil
	}
}
