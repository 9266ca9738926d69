package dir

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/capfs/capfs/audit"
	"github.com/capfs/capfs/policy"
)

// DefaultMaxReadBytes is the largest file ReadFile, File.ReadBytes and File.ReadText
// return when New is not given WithMaxReadBytes: 64 MiB. Larger files fail with
// file_too_large; stream them with Open instead.
const DefaultMaxReadBytes int64 = 64 << 20

// Option configures New.
type Option func(*env)

// WithSubject names who holds the capabilities (an agent id, a session): it is
// copied into every policy.Request and audit.Event. The default is "".
func WithSubject(subject string) Option {
	return func(e *env) { e.subject = subject }
}

// WithPolicy sets the Policy consulted on every call. The default is
// policy.AllowAll. A nil policy keeps the default.
func WithPolicy(p policy.Policy) Option {
	return func(e *env) {
		if p != nil {
			e.policy = p
			e.customPolicy = true
		}
	}
}

// WithAsker sets the Asker that settles policy.Ask decisions. Without one, Ask
// decisions deny.
func WithAsker(a policy.Asker) Option {
	return func(e *env) { e.asker = a }
}

// WithHooks appends hooks. Before hooks run in the order given, After hooks in
// reverse order.
func WithHooks(hooks ...Hook) Option {
	return func(e *env) {
		for _, h := range hooks {
			if h != nil {
				e.hooks = append(e.hooks, h)
			}
		}
	}
}

// WithAudit sets the Sink that receives one audit.Event per guest call. The
// default is audit.Discard. A nil sink keeps the default.
func WithAudit(s audit.Sink) Option {
	return func(e *env) {
		if s != nil {
			e.audit = s
		}
	}
}

// WithMaxReadBytes sets the largest file the whole-file reads (ReadFile,
// File.ReadBytes, File.ReadText, and the io/fs view's ReadFile) return; larger files
// fail with file_too_large. n <= 0 keeps DefaultMaxReadBytes; n is capped at the
// largest slice a program can allocate.
func WithMaxReadBytes(n int64) Option {
	return func(e *env) {
		if n > 0 {
			e.maxRead = min(n, math.MaxInt-1)
		}
	}
}

// Hook observes or vetoes guest calls after the policy has allowed them. Before runs
// just before the backend operation; returning an error refuses the call (nothing
// is changed; the guest sees the error, as fs_permission_denied unless it is already
// a *vfs.Error with another code). After runs once the operation has finished (or
// a later hook's Before refused it), with the error the guest will see. Hooks must be
// safe for concurrent use; they must not retain r after returning.
//
// A Hook that also implements interface{ Name() string } is named in audit events
// when it refuses a call ("hook:<name>").
type Hook interface {
	Before(ctx context.Context, r *policy.Request) error
	After(ctx context.Context, r *policy.Request, err error)
}

// env is the configuration every capability derived from one New call shares. It
// is immutable after New.
type env struct {
	subject      string
	policy       policy.Policy
	customPolicy bool // false when policy is the default AllowAll: per-path checks are skipped
	asker        policy.Asker
	hooks        []Hook
	audit        audit.Sink
	maxRead      int64
	audited      bool // audit is not audit.Discard
	plain        bool // default policy, no hooks, audit.Discard: run's fast path
	quiet        bool // nothing sees a call's Request but the policy engine: see isQuiet
	// engine is policy as a *policy.Engine in a quiet env (nil otherwise),
	// asserted once here rather than on every call.
	engine *policy.Engine

	// tmu makes a structural change (Move, Copy, Symlink, Link) atomic with its
	// checks with respect to every other mutation through Dirs over the same root
	// backend (see treeLock).
	tmu *sync.RWMutex
}

// Request IDs are a random per-process prefix and a counter: unique, ordered within
// a process, and cheap.
var (
	idPrefix  = newIDPrefix()
	idCounter atomic.Uint64
)

func newIDPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func newRequestID() string {
	var b [40]byte
	buf := append(b[:0], idPrefix...)
	buf = append(buf, '-')
	buf = strconv.AppendUint(buf, idCounter.Add(1), 10)
	return string(buf)
}
