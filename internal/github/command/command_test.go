package command

import (
	"strings"
	"testing"
)

func TestParseAccepted(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxReasonLen)
	tests := []struct {
		name string
		body string
		want Command
	}{
		{"retest default tier", "/perf retest", Command{Kind: Retest, Tier: TierQuick, Permission: Write}},
		{"retest quick", "/perf retest quick", Command{Kind: Retest, Tier: TierQuick, Permission: Write}},
		{"retest merge", "/perf retest merge", Command{Kind: Retest, Tier: TierMerge, Permission: Write}},
		{"extra spaces and CRLF", "  /perf   retest   merge  \r\n", Command{Kind: Retest, Tier: TierMerge, Permission: Write}},
		{"tab separated", "/perf\tretest", Command{Kind: Retest, Tier: TierQuick, Permission: Write}},
		{"after prose", "Looks noisy.\r\n/perf retest merge\r\nthanks", Command{Kind: Retest, Tier: TierMerge, Permission: Write}},
		{"first command wins", "/perf help\n/perf retest", Command{Kind: Help, Permission: Anyone}},
		{"after quoted command", "> /perf appeal accept\n/perf retest", Command{Kind: Retest, Tier: TierQuick, Permission: Write}},
		{"after fenced block", "```\n/perf appeal accept\n```\n/perf retest", Command{Kind: Retest, Tier: TierQuick, Permission: Write}},
		{"appeal reason", "/perf appeal  the slowdown is warm-up ", Command{Kind: Appeal, Reason: "the slowdown is warm-up", Permission: AuthorOrWrite}},
		{"appeal reason keeps inner spacing", "/perf appeal a  b", Command{Kind: Appeal, Reason: "a  b", Permission: AuthorOrWrite}},
		{"appeal reason starting like accept", "/perf appeal accepted risk", Command{Kind: Appeal, Reason: "accepted risk", Permission: AuthorOrWrite}},
		{"appeal reason at cap", "/perf appeal " + long, Command{Kind: Appeal, Reason: long, Permission: AuthorOrWrite}},
		{"appeal accept", "/perf appeal accept", Command{Kind: AppealAccept, Permission: Maintain}},
		{"appeal reject bare", "/perf appeal reject", Command{Kind: AppealReject, Permission: Maintain}},
		{"appeal reject reason", "/perf appeal reject warm-up is in the SLO", Command{Kind: AppealReject, Reason: "warm-up is in the SLO", Permission: Maintain}},
		{"help", "/perf help", Command{Kind: Help, Permission: Anyone}},
		{"ack", "/perf ack", Command{Kind: Ack, Permission: Maintain}},
		{"ack with reason", "/perf ack the runner is noisy this week", Command{Kind: Ack, Reason: "the runner is noisy this week", Permission: Maintain}},
		{"approve short sha", "/perf approve 9F4C3E1", Command{Kind: Approve, SHA: "9f4c3e1", Permission: Write}},
		{"approve full sha", "/perf approve 9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f", Command{Kind: Approve, SHA: "9f4c3e1a2b7d8e6f5a4b3c2d1e0f9a8b7c6d5e4f", Permission: Write}},
		{"indented up to three", "   /perf help", Command{Kind: Help, Permission: Anyone}},
		{"profile", "/perf profile", Command{Kind: Profile, Permission: Write}},
		{"capacity", "/perf capacity", Command{Kind: Capacity, Permission: Maintain}},
		{"soak", "/perf soak", Command{Kind: Soak, Permission: Maintain}},
		{"bisect SHAs", "/perf bisect 1a2b3c4 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", Command{Kind: Bisect, Good: "1a2b3c4", Bad: "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", Permission: Maintain}},
		{"bisect tag and branch", "/perf bisect v0.26.0 release/0.27", Command{Kind: Bisect, Good: "v0.26.0", Bad: "release/0.27", Permission: Maintain}},
		{"bisect after prose", "Found it on the nightly.\n/perf bisect abc1234 main", Command{Kind: Bisect, Good: "abc1234", Bad: "main", Permission: Maintain}},
		{"rootcause", "/perf rootcause scheduler priority change", Command{Kind: RootCause, Reason: "scheduler priority change", Permission: Maintain}},
		{"rootcause with fix PR", "/perf rootcause prefill interrupts decode: scheduler priority change fix #130", Command{Kind: RootCause, Reason: "prefill interrupts decode: scheduler priority change", Fix: "#130", Permission: Maintain}},
		{"rootcause with fix URL", "/perf rootcause KV blocks halved  Fix: https://github.com/acme/llm/pull/131", Command{Kind: RootCause, Reason: "KV blocks halved", Fix: "https://github.com/acme/llm/pull/131", Permission: Maintain}},
		{"rootcause mentioning a fix in the text", "/perf rootcause the fix #12 of last week broke batching", Command{Kind: RootCause, Reason: "the fix #12 of last week broke batching", Permission: Maintain}},
		{"rootcause at cap", "/perf rootcause " + long, Command{Kind: RootCause, Reason: long, Permission: Maintain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.body)
			if got.Action != Run {
				t.Fatalf("Parse(%q).Action = %v, reply %q; want Run", tt.body, got.Action, got.Reply)
			}
			if got.Command != tt.want {
				t.Errorf("Parse(%q).Command = %+v, want %+v", tt.body, got.Command, tt.want)
			}
		})
	}
}

func TestParseReplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		mention string // the reply must say what was wrong
	}{
		{"bare prefix", "/perf", "needs a command"},
		{"unknown subcommand", "/perf benchmark everything", "Unknown command `/perf benchmark`"},
		{"case matters", "/perf Retest", "Unknown command"},
		{"unknown tier", "/perf retest nightly", `unknown tier "nightly"`},
		{"too many retest words", "/perf retest quick merge", "at most one tier"},
		{"appeal without reason", "/perf appeal", "reason is required"},
		{"appeal with blank reason", "/perf appeal   ", "reason is required"},
		{"appeal reason too long", "/perf appeal " + strings.Repeat("y", MaxReasonLen+1), "keep it under 500"},
		{"reject reason too long", "/perf appeal reject " + strings.Repeat("y", MaxReasonLen+1), "keep it under 500"},
		{"accept with words", "/perf appeal accept because", "takes no arguments"},
		{"help with words", "/perf help me", "takes no arguments"},
		{"profile with words", "/perf profile now", "profile takes no arguments"},
		{"capacity with words", "/perf capacity 32", "capacity takes no arguments"},
		{"soak with words", "/perf soak 2h", "soak takes no arguments"},
		{"bisect bare", "/perf bisect", "two commits, the good one first"},
		{"bisect one commit", "/perf bisect abc1234", "got 1"},
		{"bisect three commits", "/perf bisect a1 b2 c3", "got 3"},
		{"bisect range form", "/perf bisect abc1234..def5678", "`/perf bisect abc1234 def5678`"},
		{"bisect triple-dot range", "/perf bisect v1...v2", "`/perf bisect v1 v2`"},
		{"bisect option-like", "/perf bisect --all main", `"--all" is not a commit`},
		{"bisect dots inside", "/perf bisect a..b main", `"a..b" is not a commit`},
		{"bisect shell", "/perf bisect main $(reboot)", "is not a commit"},
		{"bisect same commit", "/perf bisect main main", "both \"main\""},
		{"rootcause bare", "/perf rootcause", "say what caused the regression"},
		{"rootcause only a fix", "/perf rootcause fix #130", "say what caused the regression"},
		{"rootcause too long", "/perf rootcause " + strings.Repeat("y", MaxReasonLen+1), "keep it under 500"},
		{"approve without a sha", "/perf approve", "name the commit you reviewed"},
		{"approve with a short sha", "/perf approve 9f4c3e", "not a commit SHA"},
		{"approve with a non-hex word", "/perf approve looks-good", "not a commit SHA"},
		{"approve with two words", "/perf approve 9f4c3e1 9f4c3e1", "name the commit you reviewed"},
		{"ack reason too long", "/perf ack " + strings.Repeat("y", MaxReasonLen+1), "keep it under 500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.body)
			if got.Action != Reply {
				t.Fatalf("Parse(%q).Action = %v, want Reply", tt.body, got.Action)
			}
			if !strings.Contains(got.Reply, tt.mention) {
				t.Errorf("reply %q does not mention %q", got.Reply, tt.mention)
			}
			// Every reply teaches the valid commands.
			if !strings.Contains(got.Reply, HelpText()) {
				t.Errorf("reply lacks the help text: %q", got.Reply)
			}
		})
	}
}

func TestParseIgnored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"prose", "LGTM, nice speedup"},
		{"mid-line mention", "please run /perf retest"},
		{"prefix glued to word", "/perfretest"},
		{"other bot", "/benchmark retest"},
		{"quoted", "> /perf retest"},
		{"quoted indented", "  > /perf retest"},
		{"fenced backticks", "```\n/perf retest\n```"},
		{"fenced tildes", "~~~sh\n/perf retest\n~~~"},
		{"unterminated fence", "```\n/perf retest"},
		{"indented code", "    /perf retest"},
		{"tab-indented code", "\t/perf retest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.body); got.Action != Ignore {
				t.Errorf("Parse(%q) = %+v, want Ignore", tt.body, got)
			}
		})
	}
}

// The help table keeps its columns: a "|" inside a cell (the tiers of
// retest) is escaped, so every row splits into exactly three cells.
func TestHelpTableColumns(t *testing.T) {
	t.Parallel()
	for _, line := range strings.Split(strings.TrimSpace(HelpText()), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		unescaped := strings.ReplaceAll(line, `\|`, "")
		if n := strings.Count(unescaped, "|"); n != 4 {
			t.Errorf("row %q has %d cell borders, want 4", line, n)
		}
	}
	if !strings.Contains(HelpText(), "`/perf retest [quick\\|merge]`") {
		t.Errorf("retest usage not escaped:\n%s", HelpText())
	}
}

// TestHelpTextFromTable guards that help is generated from the same table
// that parsing uses: every row's usage appears and parses (with a sample
// argument where one is required).
func TestHelpTextFromTable(t *testing.T) {
	t.Parallel()
	help := HelpText()
	for _, s := range table {
		if !strings.Contains(help, "`"+strings.ReplaceAll(s.usage, "|", `\|`)+"`") {
			t.Errorf("help text lacks %q", s.usage)
		}
		body := strings.NewReplacer("<reason>", "sample reason", "<sha>", "1a2b3c4", "[quick|merge]", "quick", " [reason]", "",
			"<good> <bad>", "v0.26.0 main", "<cause>", "sample cause", "[fix <link>]", "fix #1").Replace(s.usage)
		got := Parse(body)
		if got.Action != Run || got.Command.Kind != s.kind {
			t.Errorf("usage %q parses to %+v, want kind %q", body, got, s.kind)
		}
		if PermissionFor(s.kind) != s.permission {
			t.Errorf("PermissionFor(%q) = %q, want %q", s.kind, PermissionFor(s.kind), s.permission)
		}
	}
	if got := Parse("/perf help"); got.Command.Permission != Anyone {
		t.Errorf("help permission = %q", got.Command.Permission)
	}
	// The permissions: maintainers bisect and record causes,
	// writers profile.
	for k, want := range map[Kind]Permission{Bisect: Maintain, RootCause: Maintain, Profile: Write, Capacity: Maintain, Soak: Maintain} {
		if got := PermissionFor(k); got != want {
			t.Errorf("PermissionFor(%q) = %q, want %q", k, got, want)
		}
	}
}
