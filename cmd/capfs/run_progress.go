//go:build linux

package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/capfs/capfs/materialize"
)

// progressDelay is how long an operation runs before its progress bar shows:
// a shorter one finishes before a bar would help.
const progressDelay = time.Second

// progress is a progress bar with an estimate of the time left, on a terminal,
// shown once the operation has taken progressDelay.
type progress struct {
	w     *os.File
	desc  string
	start time.Time
	count bool // counts, not bytes

	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// newProgress returns a bar writing to w, or nil when w is not a terminal.
func newProgress(w io.Writer, desc string) *progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: f, desc: desc, start: time.Now()}
}

// update takes a checkout's progress report.
func (p *progress) update(pr materialize.Progress) {
	p.set(pr.Bytes, pr.TotalBytes, pr.Done)
}

// set reports done of total (bytes).
func (p *progress) set(done, total int64, finished bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		if finished || total <= 0 || time.Since(p.start) < progressDelay {
			return
		}
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(p.desc),
			progressbar.OptionShowBytes(!p.count),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
	}
	_ = p.bar.Set64(done)
	if finished {
		_ = p.bar.Finish()
	}
}

// steps takes a sync-back's progress report (calls made of total).
func (p *progress) steps(done, total int) {
	p.count = true
	p.set(int64(done), int64(total), done == total)
}

// finish clears the bar, if one showed.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && !p.bar.IsFinished() {
		_ = p.bar.Finish()
	}
}
