package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"time"

	"github.com/capfs/capfs/backends/memory"
	"github.com/capfs/capfs/backends/sqlite"
	"github.com/capfs/capfs/dir"
	"github.com/capfs/capfs/vfs"
)

// The persistent-scratch workloads of issue 14, as one trace of operations in
// phases that every contender replays: capfs's sqlite backend through the
// Backend SPI, through a dir.Dir and from a separate Go process (sqliteproc),
// AgentFS's npm SDK from a Node process (bench/agentfs), and the memory backend.
// The trace is data (JSON), so the Node script runs exactly the same operations.

// Op is one operation of a trace: Kind, one or two paths, a size.
//
//	mkdir P | write P N (create or replace with N bytes) | read P | stat P
//	readdir P | rename P Q | rmall P | create P (empty) | lookup P (stat; missing is fine)
//	openclose P (open, fstat, close) | trunc P N (open, truncate to N, close)
type Op struct {
	Kind string `json:"k"`
	P    string `json:"p"`
	Q    string `json:"q,omitempty"`
	N    int    `json:"n,omitempty"`
}

// Phase is a named run of operations, timed as one.
type Phase struct {
	Name string `json:"name"`
	Ops  []Op   `json:"ops"`
}

// SQLiteTrace is issue 14's workload: 2,000 × 4 KiB files in nested directories
// written, read, statted, listed, renamed and removed; 50 × 1 MiB files written
// and read; and 10,000 operations of the mix AgentFS models `npx
// create-react-app` with (lookup 52 %, create 12 %, flush/release 12 %, readdir
// 7.5 %, mkdir 7 %, write 6 % of 2.7 KB on average, setattr 2 %, getattr 1.5 %).
func SQLiteTrace() []Phase { return sqliteTrace(2000, 50, 10_000) }

// sqliteTrace is SQLiteTrace at another size (the tests run a small one).
func sqliteTrace(files, bigFiles, mixOps int) []Phase {
	const top, mid = 10, 10
	var dirs, paths []string
	var mk []Op
	for a := range top {
		dirs = append(dirs, fmt.Sprintf("t/a%d", a))
		for b := range mid {
			dirs = append(dirs, fmt.Sprintf("t/a%d/b%d", a, b))
		}
	}
	mk = append(mk, Op{Kind: "mkdir", P: "t"})
	for _, d := range dirs {
		mk = append(mk, Op{Kind: "mkdir", P: d})
	}
	for i := range files {
		paths = append(paths, fmt.Sprintf("t/a%d/b%d/f%04d.txt", i%top, (i/top)%mid, i))
	}
	phase := func(name, kind string, n int) Phase {
		ph := Phase{Name: name}
		for _, p := range paths {
			ph.Ops = append(ph.Ops, Op{Kind: kind, P: p, N: n})
		}
		return ph
	}
	write := phase(fmt.Sprintf("write %d×4KiB", files), "write", 4096)
	write.Ops = append(mk, write.Ops...)
	readdir := Phase{Name: "readdir"}
	for _, d := range append([]string{"t"}, dirs...) {
		readdir.Ops = append(readdir.Ops, Op{Kind: "readdir", P: d})
	}
	rename := Phase{Name: fmt.Sprintf("rename %d", files)}
	for _, p := range paths {
		rename.Ops = append(rename.Ops, Op{Kind: "rename", P: p, Q: p + ".moved"})
	}
	big := Phase{Name: fmt.Sprintf("write+read %d×1MiB", bigFiles)}
	big.Ops = append(big.Ops, Op{Kind: "mkdir", P: "big"})
	for i := range bigFiles {
		big.Ops = append(big.Ops, Op{Kind: "write", P: fmt.Sprintf("big/b%02d", i), N: 1 << 20})
	}
	for i := range bigFiles {
		big.Ops = append(big.Ops, Op{Kind: "read", P: fmt.Sprintf("big/b%02d", i)})
	}
	return []Phase{write, phase(fmt.Sprintf("read %d", files), "read", 0), phase(fmt.Sprintf("stat %d", files), "stat", 0), readdir, rename,
		{Name: "remove-all", Ops: []Op{{Kind: "rmall", P: "t"}}}, big, opMix(mixOps)}
}

// opMix generates n operations in AgentFS's create-react-app proportions over
// a growing tree under "m".
func opMix(n int) Phase {
	r := rand.New(rand.NewPCG(14, 14))
	ph := Phase{Name: "op mix (create-react-app)"}
	dirs := []string{"m"}
	var files []string
	ph.Ops = append(ph.Ops, Op{Kind: "mkdir", P: "m"})
	anyFile := func() string {
		if len(files) == 0 {
			return ""
		}
		return files[r.IntN(len(files))]
	}
	for len(ph.Ops) < n+1 {
		x := r.IntN(1000)
		switch {
		case x < 520: // lookup: mostly hits, some misses (as a resolver probing node_modules)
			p := anyFile()
			if p == "" || r.IntN(5) == 0 {
				p = dirs[r.IntN(len(dirs))] + "/missing" + fmt.Sprint(r.IntN(100))
			}
			ph.Ops = append(ph.Ops, Op{Kind: "lookup", P: p})
		case x < 640: // create
			p := fmt.Sprintf("%s/f%d.js", dirs[r.IntN(len(dirs))], len(files))
			files = append(files, p)
			ph.Ops = append(ph.Ops, Op{Kind: "create", P: p})
		case x < 715:
			ph.Ops = append(ph.Ops, Op{Kind: "readdir", P: dirs[r.IntN(len(dirs))]})
		case x < 785:
			d := fmt.Sprintf("%s/d%d", dirs[r.IntN(len(dirs))], len(dirs))
			dirs = append(dirs, d)
			ph.Ops = append(ph.Ops, Op{Kind: "mkdir", P: d})
		case x < 845:
			if p := anyFile(); p != "" {
				ph.Ops = append(ph.Ops, Op{Kind: "write", P: p, N: 200 + r.IntN(5000)}) // mean 2.7 KB
			}
		case x < 965:
			if p := anyFile(); p != "" {
				ph.Ops = append(ph.Ops, Op{Kind: "openclose", P: p})
			}
		case x < 985:
			if p := anyFile(); p != "" {
				ph.Ops = append(ph.Ops, Op{Kind: "trunc", P: p, N: r.IntN(1000)})
			}
		default:
			ph.Ops = append(ph.Ops, Op{Kind: "stat", P: dirs[r.IntN(len(dirs))]})
		}
	}
	return ph
}

// WriteTrace writes the trace as JSON for the other processes.
func WriteTrace(name string, phases []Phase) error {
	b, err := json.Marshal(phases)
	if err != nil {
		return err
	}
	return os.WriteFile(name, b, 0o600)
}

// ReadTrace reads a trace WriteTrace wrote.
func ReadTrace(name string) ([]Phase, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var ph []Phase
	return ph, json.Unmarshal(b, &ph)
}

// FSOps is what a trace needs of a filesystem.
type FSOps interface {
	Mkdir(p string) error
	WriteFile(p string, data []byte) error
	ReadFile(p string) (int, error)
	Stat(p string) error
	ReadDir(p string) (int, error)
	Rename(p, q string) error
	RemoveAll(p string) error
	OpenClose(p string) error
	Truncate(p string, n int64) error
}

var traceData = pattern(1 << 20)

// RunTrace replays phases on t and returns each phase's wall-clock time. A
// lookup of a missing name is not an error; any other failure is.
func RunTrace(t FSOps, phases []Phase) ([]time.Duration, error) {
	out := make([]time.Duration, len(phases))
	for i, ph := range phases {
		start := time.Now()
		for _, op := range ph.Ops {
			var err error
			switch op.Kind {
			case "mkdir":
				err = t.Mkdir(op.P)
			case "write":
				err = t.WriteFile(op.P, traceData[:op.N])
			case "create":
				err = t.WriteFile(op.P, nil)
			case "read":
				var n int
				if n, err = t.ReadFile(op.P); err == nil && n == 0 {
					err = fmt.Errorf("read %s: empty", op.P)
				}
			case "stat":
				err = t.Stat(op.P)
			case "lookup":
				if err = t.Stat(op.P); errors.Is(err, fs.ErrNotExist) {
					err = nil
				}
			case "readdir":
				_, err = t.ReadDir(op.P)
			case "rename":
				err = t.Rename(op.P, op.Q)
			case "rmall":
				err = t.RemoveAll(op.P)
			case "openclose":
				err = t.OpenClose(op.P)
			case "trunc":
				err = t.Truncate(op.P, int64(op.N))
			default:
				err = fmt.Errorf("unknown op %q", op.Kind)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", ph.Name, op.Kind, op.P, err)
			}
		}
		out[i] = time.Since(start)
	}
	return out, nil
}

// BackendOps drives a vfs.Backend directly (the SPI, no Dir).
type BackendOps struct{ B vfs.Backend }

var bgCtx = context.Background()

func (o BackendOps) Mkdir(p string) error { return o.B.Mkdir(bgCtx, vfs.MustParse(p), 0o755) }

func (o BackendOps) WriteFile(p string, data []byte) error {
	f, err := o.B.OpenFile(bgCtx, vfs.MustParse(p), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (o BackendOps) ReadFile(p string) (int, error) {
	f, err := o.B.OpenFile(bgCtx, vfs.MustParse(p), os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, info.Size)
	n, err := io.ReadFull(f, buf)
	return n, err
}

func (o BackendOps) Stat(p string) error { _, err := o.B.Stat(bgCtx, vfs.MustParse(p)); return err }

func (o BackendOps) ReadDir(p string) (int, error) {
	e, err := o.B.ReadDir(bgCtx, vfs.MustParse(p))
	return len(e), err
}

func (o BackendOps) Rename(p, q string) error {
	return o.B.Rename(bgCtx, vfs.MustParse(p), vfs.MustParse(q), 0)
}

func (o BackendOps) RemoveAll(p string) error {
	var rm func(p vfs.Path) error
	rm = func(p vfs.Path) error {
		info, err := o.B.Lstat(bgCtx, p)
		if err != nil {
			return err
		}
		if info.Mode.IsDir() {
			ents, err := o.B.ReadDir(bgCtx, p)
			if err != nil {
				return err
			}
			for _, e := range ents {
				c, _ := p.Child(e.Name)
				if err := rm(c); err != nil {
					return err
				}
			}
		}
		return o.B.Remove(bgCtx, p)
	}
	return rm(vfs.MustParse(p))
}

func (o BackendOps) OpenClose(p string) error {
	f, err := o.B.OpenFile(bgCtx, vfs.MustParse(p), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.Stat(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (o BackendOps) Truncate(p string, n int64) error {
	f, err := o.B.OpenFile(bgCtx, vfs.MustParse(p), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// DirOps drives a dir.Dir: every call a full enforcement pass.
type DirOps struct{ D *dir.Dir }

func (o DirOps) Mkdir(p string) error { _, err := o.D.CreateDir(bgCtx, p); return err }
func (o DirOps) WriteFile(p string, data []byte) error {
	return o.D.WriteFile(bgCtx, p, data, 0o644)
}
func (o DirOps) ReadFile(p string) (int, error) {
	b, err := o.D.ReadFile(bgCtx, p)
	return len(b), err
}
func (o DirOps) Stat(p string) error { _, err := o.D.Stat(bgCtx, p); return err }
func (o DirOps) ReadDir(p string) (int, error) {
	e, err := o.D.ReadDir(bgCtx, p)
	return len(e), err
}
func (o DirOps) Rename(p, q string) error { return o.D.Move(bgCtx, p, q) }
func (o DirOps) RemoveAll(p string) error { return o.D.RemoveAll(bgCtx, p) }
func (o DirOps) OpenClose(p string) error {
	h, err := o.D.Open(bgCtx, p, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	if _, err := h.Stat(); err != nil {
		h.Close()
		return err
	}
	return h.Close()
}
func (o DirOps) Truncate(p string, n int64) error {
	h, err := o.D.Open(bgCtx, p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = h.Truncate(n)
	if cerr := h.Close(); err == nil {
		err = cerr
	}
	return err
}

// SQLiteContender is one column of the sqlite table: Run replays the trace
// (written at trace) in a fresh store under dir and returns each phase's time
// and the whole run's (a process's including its start).
type SQLiteContender struct {
	Name string
	Run  func(dir, trace string, phases []Phase) (per []time.Duration, total time.Duration, err error)
}

// InProcess is a contender replaying the trace in this process on what open
// returns; close is called after the run, untimed.
func InProcess(name string, open func(dir string) (FSOps, func() error, error)) SQLiteContender {
	return SQLiteContender{Name: name, Run: func(dir, _ string, phases []Phase) ([]time.Duration, time.Duration, error) {
		start := time.Now()
		ops, closeFn, err := open(dir)
		if err != nil {
			return nil, 0, err
		}
		per, err := RunTrace(ops, phases)
		total := time.Since(start)
		if cerr := closeFn(); err == nil {
			err = cerr
		}
		return per, total, err
	}}
}

// SQLiteInProcess are the in-process contenders: sqlite through the SPI and a
// Dir, and the memory backend through the SPI.
func SQLiteInProcess() []SQLiteContender {
	return []SQLiteContender{
		InProcess("capfs sqlite (SPI)", func(d string) (FSOps, func() error, error) {
			f, err := sqlite.Open(d + "/scratch.db")
			if err != nil {
				return nil, nil, err
			}
			return BackendOps{f}, f.Close, nil
		}),
		InProcess("capfs sqlite (Dir)", func(d string) (FSOps, func() error, error) {
			f, err := sqlite.Open(d + "/scratch.db")
			if err != nil {
				return nil, nil, err
			}
			dd, _ := dir.New(f)
			return DirOps{dd}, f.Close, nil
		}),
		InProcess("memory (SPI)", func(string) (FSOps, func() error, error) {
			return BackendOps{memory.New()}, func() error { return nil }, nil
		}),
	}
}
