package main

import (
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how far a long command has got, on stderr, while stderr
// is a terminal: one line per phase, redrawn in place at least every
// progressTick (so the time spent moves while a step takes long) and
// cleared when the phase or the command ends. A phase of known size is a
// bar with its count and the time left; one of unknown size shows the time
// spent. In a pipe, a file or CI, and with --json or --quiet, it draws
// nothing, so that what a command prints is the same with and without it.
//
// Its methods may be called from any goroutine; on a quiet progress they
// do nothing.
type progress struct {
	mu    sync.Mutex
	w     io.Writer // nil: quiet
	pb    *progressbar.ProgressBar
	desc  string
	total int           // of the current phase; -1: unknown
	done  int           // of total
	stop  chan struct{} // ends the current phase's redraws
}

// progressTick is how often a phase's line is redrawn without news.
const progressTick = 250 * time.Millisecond

// newProgress returns the progress of a command: drawn on e.Stderr when it
// is a terminal (isTerminal, which tests replace), unless quiet (--json,
// --quiet).
func newProgress(e env, quiet bool) *progress {
	if quiet || !isTerminal(e.Stderr) {
		return &progress{}
	}
	return &progress{w: e.Stderr}
}

// newBar returns the progress of a command of one phase, desc, of total
// steps; none when total is not positive.
func newBar(e env, total int, desc string) *progress {
	p := newProgress(e, false)
	if total > 0 {
		p.update(desc, 0, total)
	}
	return p
}

// update says what the command does, desc, and how far it is: done of
// total steps, or of an unknown number when total is not positive. A new
// total, or a count that goes back, starts a new phase on a cleared line,
// its time counted from zero; a new desc alone relabels the current one
// ("measuring a:", then "measuring b:", in steps of the same count).
func (p *progress) update(desc string, done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	max := total
	if max <= 0 {
		max = -1
	}
	if p.pb != nil && max == p.total && done >= p.done && desc != p.desc {
		p.desc = desc
		p.pb.Describe(desc)
	}
	if p.pb == nil || max != p.total || done < p.done || desc != p.desc {
		p.endLocked()
		p.desc = desc
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(progressTick / 2),
		}
		if max > 0 {
			opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true))
		} else {
			// A spinner that turns at each redraw: no goroutine of the
			// library's own drawing after the phase ends.
			opts = append(opts, progressbar.OptionSpinnerType(14), progressbar.OptionSetSpinnerChangeInterval(0))
		}
		p.pb = progressbar.NewOptions(max, opts...)
		p.stop = make(chan struct{})
		go p.redraw(p.stop)
	}
	p.total, p.done = max, done
	if max > 0 {
		p.pb.Set(min(done, max))
	} else {
		p.redrawLocked()
	}
}

// redrawLocked draws the current phase's line anew: the time spent moves,
// the spinner turns.
func (p *progress) redrawLocked() {
	if p.total > 0 {
		p.pb.Add(0) // drawn for the count it shows, throttled
	} else {
		p.pb.RenderBlank() // drawn as at the start, the count being 0
	}
}

// step moves the current phase to done of total steps (total 0: as
// before), for callbacks that report no phase.
func (p *progress) step(done, total int) {
	p.mu.Lock()
	desc, started := p.desc, p.pb != nil
	if total <= 0 {
		total = p.total
	}
	p.mu.Unlock()
	if started {
		p.update(desc, done, total)
	}
}

// redraw redraws the current phase every progressTick until stop is
// closed.
func (p *progress) redraw(stop chan struct{}) {
	t := time.NewTicker(progressTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		select {
		case <-stop:
		default:
			p.redrawLocked()
		}
		p.mu.Unlock()
	}
}

// finish clears the line of the current phase: the command's own output
// follows on a clean line.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
}

func (p *progress) endLocked() {
	if p.pb == nil {
		return
	}
	close(p.stop)
	p.pb.Clear()
	p.pb, p.desc = nil, ""
}
