package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/longrun"
	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// LongRunOptions turn on the capacity and soak judges.
type LongRunOptions struct {
	// Files opens the artifacts runners uploaded.
	Files TraceFiles
}

// EnableLongRun routes finished capacity and soak jobs to their judges
// (longruncheck.go): each concludes its `perfgate / capacity` or
// `perfgate / soak` check run with the capacity comparison and its
// latency–throughput table, or the soak's trends. A job queued without a
// check run posts its verdict on the pull request instead.
func (s *Service) EnableLongRun(o LongRunOptions) {
	s.longRun = &o
	s.router.Route(agentapi.KindCapacity, s.longRunDone, s.cannotJudge)
	s.router.Route(agentapi.KindSoak, s.longRunDone, s.cannotJudge)
}

// CapacityVerdict is a finished capacity job's judgement: the comparison
// of the knees and, made from it once, the verdict document every surface
// prints (longrun.Capacity).
type CapacityVerdict struct {
	Comparison capacity.Comparison
	Report     *gate.Report
	Base, Head *capacity.Sweep // the first sweep of each side, drawn
	// Markdown is the sweeps' table for the maintainer's details; SVG
	// their curves.
	Markdown string
	SVG      string
}

// ArtifactLister is what judging a long run reads of the store: the
// artifacts its runner uploaded.
type ArtifactLister interface {
	ListArtifacts(ctx context.Context, jobID int64) ([]store.Artifact, error)
}

// JudgeCapacity compares a capacity job's sweeps: every sweep's knee per
// side, base against head.
func JudgeCapacity(ctx context.Context, st ArtifactLister, files TraceFiles, job store.Job) (CapacityVerdict, error) {
	var v CapacityVerdict
	var plan agentapi.Plan
	if err := json.Unmarshal(job.Config, &plan); err != nil || plan.Capacity == nil {
		return v, fmt.Errorf("capacity job %d: its plan has no capacity section (%w)", job.ID, err)
	}
	arts, err := st.ListArtifacts(ctx, job.ID)
	if err != nil {
		return v, fmt.Errorf("capacity job %d: %w", job.ID, err)
	}
	knees := map[string][]capacity.Knee{}
	for _, a := range arts {
		if !strings.HasPrefix(a.Name, agentapi.CapacityArtifactPrefix) {
			continue
		}
		var sw agentapi.CapacitySweep
		if err := readArtifact(files, a, &sw); err != nil || sw.Sweep == nil {
			zerolog.Ctx(ctx).Warn().Err(err).Int64("artifact", a.ID).Msg("capacity sweep unreadable")
			continue
		}
		knees[a.Side] = append(knees[a.Side], sw.Sweep.Knee())
		switch {
		case a.Side == agentapi.SideBase && v.Base == nil:
			v.Base = sw.Sweep
		case a.Side == agentapi.SideHead && v.Head == nil:
			v.Head = sw.Sweep
		}
	}
	headOnly := plan.BaseSHA == "" || plan.BaseSHA == plan.HeadSHA
	if v.Head == nil || v.Base == nil && !headOnly {
		return v, fmt.Errorf("capacity job %d: no sweep of %s", job.ID, map[bool]string{true: "head", false: "base"}[v.Head == nil])
	}
	var md, svg bytes.Buffer
	if headOnly {
		// The nightly sweeps the branch's head alone: its knee is
		// recorded, nothing is compared.
		v.Comparison = capacity.Record(knees[agentapi.SideHead], plan.Capacity.Threshold)
		err = capacity.MarkdownHead(&md, v.Head)
	} else {
		v.Comparison = capacity.Compare(knees[agentapi.SideBase], knees[agentapi.SideHead], plan.Capacity.Threshold)
		err = capacity.Markdown(&md, v.Base, v.Head)
	}
	if err != nil {
		return v, err
	}
	if v.Report, err = longrun.Capacity(v.Comparison); err != nil {
		return v, fmt.Errorf("capacity job %d: %w", job.ID, err)
	}
	if err := capacity.SVG(&svg, v.Base, v.Head); err != nil {
		return v, err
	}
	v.Markdown, v.SVG = md.String(), svg.String()
	return v, nil
}

// capacityDone posts a finished capacity job's verdict on its PR.
func (s *Service) capacityDone(ctx context.Context, job store.Job, o LongRunOptions) error {
	if job.PRNumber <= 0 || job.Status == jobstate.Cancelled {
		return nil
	}
	key := fmt.Sprintf("capacity:%d:%d", job.ID, job.Attempts)
	if job.Status != jobstate.Succeeded {
		return s.postComment(ctx, key, job, fmt.Sprintf("perfgate could not sweep the capacity of `%s` against `%s` (job %d %s: %s).",
			rev.Short(job.HeadSHA), rev.Short(job.BaseSHA), job.ID, job.Status, orWhy(job.FailureReason)))
	}
	v, err := JudgeCapacity(ctx, s.st, o.Files, job)
	if err != nil {
		return s.postComment(ctx, key, job, fmt.Sprintf("perfgate could not judge the capacity sweep of `%s` (job %d): %v.", rev.Short(job.HeadSHA), job.ID, err))
	}
	zerolog.Ctx(ctx).Info().Int64("job_id", job.ID).Str("verdict", string(v.Report.Verdict)).Str("headline", v.Report.Headline).Msg("capacity judged")
	body, err := longRunVerdictComment(job, v.Report, v.Markdown)
	if err != nil {
		return err
	}
	return s.postComment(ctx, key, job, fmt.Sprintf("## perfgate capacity: `%s` (base) → `%s` (head)\n\n%s", rev.Short(job.BaseSHA), rev.Short(job.HeadSHA), body))
}

// JudgeSoak reads a soak job's run.
func JudgeSoak(ctx context.Context, st ArtifactLister, files TraceFiles, job store.Job) (agentapi.SoakRun, error) {
	var run agentapi.SoakRun
	arts, err := st.ListArtifacts(ctx, job.ID)
	if err != nil {
		return run, fmt.Errorf("soak job %d: %w", job.ID, err)
	}
	for _, a := range arts {
		if a.Name == agentapi.SoakArtifact {
			if err := readArtifact(files, a, &run); err != nil {
				return run, fmt.Errorf("soak job %d: %w", job.ID, err)
			}
			return run, nil
		}
	}
	return run, fmt.Errorf("soak job %d uploaded no %s", job.ID, agentapi.SoakArtifact)
}

// soakDone posts a finished soak's trends on its PR.
func (s *Service) soakDone(ctx context.Context, job store.Job, o LongRunOptions) error {
	if job.PRNumber <= 0 || job.Status == jobstate.Cancelled {
		return nil
	}
	key := fmt.Sprintf("soak:%d:%d", job.ID, job.Attempts)
	if job.Status != jobstate.Succeeded {
		return s.postComment(ctx, key, job, fmt.Sprintf("perfgate could not soak `%s` (job %d %s: %s).",
			rev.Short(job.HeadSHA), job.ID, job.Status, orWhy(job.FailureReason)))
	}
	run, err := JudgeSoak(ctx, s.st, o.Files, job)
	if err != nil {
		return s.postComment(ctx, key, job, fmt.Sprintf("perfgate could not judge the soak of `%s`: %v.", rev.Short(job.HeadSHA), err))
	}
	rep, err := longrun.Soak(run.Report)
	if err != nil {
		return s.postComment(ctx, key, job, fmt.Sprintf("perfgate could not judge the soak of `%s`: %v.", rev.Short(job.HeadSHA), err))
	}
	zerolog.Ctx(ctx).Info().Int64("job_id", job.ID).Str("verdict", string(rep.Verdict)).Str("headline", rep.Headline).Msg("soak judged")
	body, err := longRunVerdictComment(job, rep, "")
	if err != nil {
		return err
	}
	return s.postComment(ctx, key, job, fmt.Sprintf("## perfgate soak: `%s`\n\n%s", rev.Short(job.HeadSHA), body))
}

// longRunVerdictComment is a long run's verdict document as the check
// run's summary prints it, for a job queued without a check run.
func longRunVerdictComment(job store.Job, rep *gate.Report, detail string) (string, error) {
	v := report.FromGate(report.View{Verdict: report.VerdictOf(rep.Verdict), SHA: job.HeadSHA, Detail: detail}, rep, nil)
	c, err := report.RenderCheck(v)
	if err != nil {
		return "", fmt.Errorf("render the verdict of job %d: %w", job.ID, err)
	}
	return c.Summary, nil
}

func readArtifact(files TraceFiles, a store.Artifact, v any) error {
	if files == nil {
		return fmt.Errorf("artifact %s: no artifact store", a.Name)
	}
	f, err := files.Open(a.SHA256)
	if err != nil {
		return fmt.Errorf("open artifact %s: %w", a.Name, err)
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(v); err != nil {
		return fmt.Errorf("decode artifact %s: %w", a.Name, err)
	}
	return nil
}
