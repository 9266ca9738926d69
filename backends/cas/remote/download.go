package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/capfs/capfs/backends/cas"
)

// Download makes the local store hold every blob of the tree root from the
// server: directories are prefetched with GetTree, then each directory the
// store still lacks is read as a blob, and every file blob the store lacks is
// fetched (batched, or streamed when large). Every blob is verified before it is
// stored. A blob the server no longer holds fails with an error matching
// ErrMissing.
//
// What Download brings into the store is bounded by Options.MaxDownloadBytes:
// each blob is charged its declared size before it is asked for (a blob is
// never read past that size, nor a compressed stream past [maxWire] of it,
// counted as it arrives), a prefetched directory its length when stored,
// and the files are charged all together before the first is fetched, so a
// tree naming more than the budget fails with an error matching [ErrBudget]
// having fetched none of them. The store then holds only whole, verified
// blobs (no name points at the partial tree).
func (c *Client) Download(ctx context.Context, st *cas.Store, root cas.Digest) (TransferStats, error) {
	var ts TransferStats
	bud := &budget{left: c.opts.MaxDownloadBytes, max: c.opts.MaxDownloadBytes}
	if err := c.capabilities(ctx); err != nil {
		return ts, fmt.Errorf("remote: GetCapabilities: %w", err)
	}
	pre, err := c.prefetchTree(ctx, root)
	if err != nil && !errors.Is(err, ErrMissing) {
		return ts, err
	}
	// Walk the tree level by level, fetching the directories GetTree did not
	// give in their exact bytes.
	w := &treeFetch{ctx: ctx, st: st, bud: bud, ts: &ts, pre: pre, seenD: map[cas.Digest]bool{}, seenF: map[cas.Digest]bool{}}
	for level := []cas.Digest{root}; len(level) > 0; {
		lack, err := w.lacking(level)
		if err != nil {
			return ts, err
		}
		ts.Missing += len(lack)
		if err := c.fetch(ctx, st, lack, &ts, bud); err != nil {
			return ts, err
		}
		if level, err = w.expand(level); err != nil {
			return ts, err
		}
	}
	ts.Blobs += len(w.files)
	var lack []cas.Digest
	for _, d := range w.files {
		if ok, err := st.Has(d); err != nil {
			return ts, err
		} else if !ok {
			lack = append(lack, d)
		}
	}
	ts.Missing += len(lack)
	return ts, c.fetch(ctx, st, lack, &ts, bud)
}

// treeFetch is one Download's walk of the tree: the directories GetTree
// gave (pre), those and the files seen so far, the files to fetch last.
type treeFetch struct {
	ctx          context.Context
	st           *cas.Store
	bud          *budget
	ts           *TransferStats
	pre          map[cas.Digest][]byte
	seenD, seenF map[cas.Digest]bool
	files        []cas.Digest
}

// lacking stores the directories of level that GetTree gave (charged to the
// budget) and returns those the store still lacks.
func (w *treeFetch) lacking(level []cas.Digest) ([]cas.Digest, error) {
	var lack []cas.Digest
	for _, d := range level {
		if ok, err := w.st.Has(d); err != nil {
			return nil, err
		} else if ok {
			continue
		}
		b, ok := w.pre[d]
		if !ok {
			lack = append(lack, d)
			continue
		}
		if err := w.bud.charge(int64(len(b))); err != nil {
			return nil, err
		}
		if _, err := w.st.PutBytes(w.ctx, b); err != nil {
			return nil, err
		}
		w.ts.TreeDirs++
	}
	return lack, nil
}

// expand reads the directories of level from the store, notes the files
// they name, and returns the subdirectories not seen yet: the next level.
func (w *treeFetch) expand(level []cas.Digest) ([]cas.Digest, error) {
	var next []cas.Digest
	for _, d := range level {
		w.ts.Blobs++
		b, err := w.st.ReadBlob(w.ctx, d, 64<<20)
		if err != nil {
			return nil, err
		}
		dir, err := cas.DecodeDirectory(b)
		if err != nil {
			return nil, fmt.Errorf("remote: directory %s: %w", d, err)
		}
		for _, f := range dir.Files {
			if !w.seenF[f.Digest] {
				w.seenF[f.Digest] = true
				w.files = append(w.files, f.Digest)
			}
		}
		for _, s := range dir.Dirs {
			if !w.seenD[s.Digest] {
				w.seenD[s.Digest] = true
				next = append(next, s.Digest)
			}
		}
	}
	return next, nil
}

// budget is what a Download may still bring into the store.
type budget struct{ left, max int64 }

// charge takes n bytes from b, or fails with ErrBudget (taking nothing) when
// fewer are left.
func (b *budget) charge(n int64) error {
	if n < 0 || n > b.left {
		return fmt.Errorf("%w: the tree needs more than the %d bytes allowed", ErrBudget, b.max)
	}
	b.left -= n
	return nil
}

// maxPrefetch bounds what GetTree may hand Download: the bytes of its
// answers, empty ones counted as one byte (and as many pages). Past it the
// rest of the tree is read a directory at a time, as if GetTree had stopped
// there; a server that streams without end fills neither memory nor the
// store.
var maxPrefetch = 64 << 20

// prefetchTree returns the directories GetTree answers for root whose
// canonical encoding is their digest's, by digest, within maxPrefetch. The
// caller stores those its walk of the tree reaches, and nothing else.
func (c *Client) prefetchTree(ctx context.Context, root cas.Digest) (map[cas.Digest][]byte, error) {
	pre := map[cas.Digest][]byte{}
	token, total, pages := "", 0, 0
	for total < maxPrefetch && pages < 4096 {
		pages++
		var next string
		err := c.retry(ctx, func(ctx context.Context) error {
			next = ""
			ctx, cancel := context.WithCancel(ctx)
			defer cancel() // ends the stream when the budget stops reading it
			stream, err := c.cas.GetTree(ctx, &repb.GetTreeRequest{InstanceName: c.opts.Instance, RootDigest: pb(root), PageToken: token, DigestFunction: repb.DigestFunction_SHA256})
			if err != nil {
				return err
			}
			for total < maxPrefetch {
				resp, err := stream.Recv()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				// Every answer counts, kept or not, empty or not.
				total += proto.Size(resp) + 1
				next = resp.GetNextPageToken()
				for _, d := range resp.GetDirectories() {
					b, err := proto.MarshalOptions{Deterministic: true}.Marshal(d)
					if err != nil {
						continue
					}
					if _, err := cas.DecodeDirectory(b); err != nil {
						continue // not a Directory the store would accept
					}
					pre[cas.DigestOf(b)] = b
				}
			}
			next = "" // the budget is spent: no further page
			return nil
		})
		if status.Code(err) == codes.NotFound {
			return pre, fmt.Errorf("%w: tree %s", ErrMissing, root)
		}
		if err != nil {
			return pre, fmt.Errorf("remote: GetTree %s: %w", root, err)
		}
		if next == "" || next == token {
			return pre, nil
		}
		token = next
	}
	return pre, nil
}

// fetch stores blobs ds from the server, once their declared sizes are
// charged to bud all together.
func (c *Client) fetch(ctx context.Context, st *cas.Store, ds []cas.Digest, ts *TransferStats, bud *budget) error {
	if len(ds) == 0 {
		return nil
	}
	if err := chargeAll(bud, ds); err != nil {
		return err
	}
	small, large := c.bySize(ds, ts)
	ts.Batched += len(small)
	ts.Streams += len(large)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &fetchGroup{cancel: cancel, sem: make(chan struct{}, c.opts.Concurrency)}
	for _, group := range c.batches(small) {
		if ctx.Err() != nil {
			break
		}
		g.run(func() error { return c.batchRead(ctx, st, group) })
	}
	for _, d := range large {
		if ctx.Err() != nil {
			break
		}
		g.run(func() error { return c.streamRead(ctx, st, d) })
	}
	g.wg.Wait()
	if g.first != nil {
		return g.first
	}
	return ctx.Err()
}

// chargeAll charges the declared sizes of ds to bud all together (a
// negative size, or a sum past int64, charges more than any budget).
func chargeAll(bud *budget, ds []cas.Digest) error {
	var total int64
	for _, d := range ds {
		if total += d.Size; d.Size < 0 || total < 0 {
			return bud.charge(-1)
		}
	}
	return bud.charge(total)
}

// batches groups small blobs, in order, into batch reads of at most
// maxBatch bytes (counting 1 KiB for each blob's framing).
func (c *Client) batches(small []cas.Digest) [][]cas.Digest {
	var out [][]cas.Digest
	for i := 0; i < len(small); {
		var group []cas.Digest
		var total int64
		for i < len(small) && (len(group) == 0 || total+small[i].Size+1024 <= c.maxBatch) {
			group = append(group, small[i])
			total += small[i].Size + 1024
			i++
		}
		out = append(out, group)
	}
	return out
}

// fetchGroup runs fetches at most cap(sem) at a time, keeping the first
// error and canceling the others on it.
type fetchGroup struct {
	mu     sync.Mutex
	first  error
	wg     sync.WaitGroup
	sem    chan struct{}
	cancel func()
}

// run starts fn once a slot is free.
func (g *fetchGroup) run(fn func() error) {
	g.sem <- struct{}{}
	g.wg.Go(func() {
		defer func() { <-g.sem }()
		if err := fn(); err != nil {
			g.mu.Lock()
			if g.first == nil {
				g.first = err
			}
			g.mu.Unlock()
			g.cancel()
		}
	})
}

func (c *Client) batchRead(ctx context.Context, st *cas.Store, ds []cas.Digest) error {
	pending := map[cas.Digest]bool{}
	for _, d := range ds {
		pending[d] = true
	}
	return c.retry(ctx, func(ctx context.Context) error {
		req := &repb.BatchReadBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
		for d := range pending {
			req.Digests = append(req.Digests, pb(d))
		}
		resp, err := c.cas.BatchReadBlobs(ctx, req)
		if err != nil {
			return err
		}
		var again error
		for _, r := range resp.GetResponses() {
			d, err := fromPB(r.GetDigest())
			if err != nil {
				return err
			}
			if !pending[d] {
				continue
			}
			switch code := codes.Code(r.GetStatus().GetCode()); code {
			case codes.OK:
				data := r.GetData()
				if r.GetCompressor() == repb.Compressor_ZSTD {
					if data, err = zstdDecodeAll(data, d.Size); err != nil {
						return fmt.Errorf("remote: blob %s: %w", d, err)
					}
				}
				if err := st.PutDigest(ctx, d, bytes.NewReader(data)); err != nil {
					return fmt.Errorf("remote: blob %s from the server: %w", d, err)
				}
				delete(pending, d)
				if c.opts.OnBlob != nil {
					c.opts.OnBlob(d)
				}
			case codes.NotFound:
				return fmt.Errorf("%w: %s", ErrMissing, d)
			default:
				again = status.Error(code, r.GetStatus().GetMessage())
			}
		}
		if again == nil && len(pending) > 0 {
			again = status.Error(codes.Unavailable, "server answered for fewer blobs than asked")
		}
		return again
	})
}

var zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20))

func zstdDecodeAll(b []byte, size int64) ([]byte, error) {
	return zdec.DecodeAll(b, make([]byte, 0, size))
}

// streamRead reads one blob through ByteStream into the store, verified; a
// failed attempt starts again.
func (c *Client) streamRead(ctx context.Context, st *cas.Store, d cas.Digest) error {
	err := c.retry(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the receiving goroutine whatever happens
		name := fmt.Sprintf("%sblobs/%s/%d", c.prefix(), d.Hex(), d.Size)
		if c.zstd {
			name = fmt.Sprintf("%scompressed-blobs/zstd/%s/%d", c.prefix(), d.Hex(), d.Size)
		}
		rs, err := c.bs.Read(ctx, &bspb.ReadRequest{ResourceName: name})
		if err != nil {
			return err
		}
		pr, pw := io.Pipe()
		go func() {
			lim, got := maxWire(d.Size, c.zstd), int64(0)
			for {
				resp, err := rs.Recv()
				if err == io.EOF {
					pw.Close()
					return
				}
				if err != nil {
					pw.CloseWithError(err)
					return
				}
				if got += int64(len(resp.GetData())); got > lim {
					pw.CloseWithError(fmt.Errorf("%w: the server sent more than the %d bytes a blob of %d takes", ErrBudget, lim, d.Size))
					return
				}
				if _, err := pw.Write(resp.GetData()); err != nil {
					return
				}
			}
		}()
		defer pr.Close()
		var src io.Reader = pr
		if c.zstd {
			zr, err := zstd.NewReader(pr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
			if err != nil {
				return err
			}
			defer zr.Close()
			src = zr
		}
		err = st.PutDigest(ctx, d, src)
		var se interface{ GRPCStatus() *status.Status }
		if errors.As(err, &se) {
			return se.GRPCStatus().Err()
		}
		return err
	})
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("%w: %s", ErrMissing, d)
	}
	if err != nil {
		return fmt.Errorf("remote: download %s: %w", d, err)
	}
	if c.opts.OnBlob != nil {
		c.opts.OnBlob(d)
	}
	return nil
}

// maxWire is the most bytes a ByteStream read of a blob of size n may bring:
// n, and when compressed zstd's worst case over it (a few bytes per block and
// frame: n/64 and 64 KiB are far more). Bytes are charged as they arrive, so
// a compressed stream that never yields its blob (skippable or empty frames
// without end) stops there.
func maxWire(n int64, compressed bool) int64 {
	if !compressed {
		return n
	}
	return n + n/64 + 64<<10
}

// rootKey returns the Action digest that names root name, and the Command and
// Action blobs it is made of.
func rootKey(name string) (cas.Digest, [][]byte) {
	cmd, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&repb.Command{Arguments: []string{"capfs-cas-root", name}})
	act, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&repb.Action{CommandDigest: pb(cas.DigestOf(cmd)), InputRootDigest: pb(cas.EmptyDigest), DoNotCache: false})
	return cas.DigestOf(act), [][]byte{cmd, act}
}

// treeMessage encodes a REAPI Tree of the directories (root first) in the
// topologically sorted record form, from their exact bytes.
func treeMessage(dirs []cas.Digest, raw map[cas.Digest][]byte) []byte {
	var b []byte
	for i, d := range dirs {
		tag := byte(0x12)
		if i == 0 {
			tag = 0x0a
		}
		b = append(b, tag)
		b = binary.AppendUvarint(b, uint64(len(raw[d])))
		b = append(b, raw[d]...)
	}
	return b
}

// SaveRoot uploads the local tree root (everything the server lacks) and names
// it name on the server: an Action Cache entry whose output directory "root" is
// the tree.
func (c *Client) SaveRoot(ctx context.Context, st *cas.Store, name string, root cas.Digest) (TransferStats, error) {
	if !cas.ValidRootName(name) {
		return TransferStats{}, fmt.Errorf("%w: %q", cas.ErrBadName, name)
	}
	ts, err := c.Upload(ctx, st, root)
	if err != nil {
		return ts, err
	}
	dirs, raw, _, err := treeBlobs(ctx, st, root)
	if err != nil {
		return ts, err
	}
	tree := treeMessage(dirs, raw)
	key, parts := rootKey(name)
	var extra []cas.Digest
	for _, b := range append(parts, tree) {
		d, err := st.PutBytes(ctx, b)
		if err != nil {
			return ts, err
		}
		extra = append(extra, d)
	}
	if err := c.send(ctx, st, extra, &TransferStats{}); err != nil {
		return ts, err
	}
	ar := &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{
		Path: "root", TreeDigest: pb(cas.DigestOf(tree)), IsTopologicallySorted: true,
	}}}
	err = c.retry(ctx, func(ctx context.Context) error {
		_, err := c.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: c.opts.Instance, ActionDigest: pb(key), ActionResult: ar, DigestFunction: repb.DigestFunction_SHA256})
		return err
	})
	if err != nil {
		return ts, fmt.Errorf("remote: UpdateActionResult: %w", err)
	}
	return ts, nil
}

// FetchRoot looks name up on the server and returns the root digest it names
// (the first record of the output directory's Tree). Download then fetches the
// tree.
func (c *Client) FetchRoot(ctx context.Context, name string) (cas.Digest, error) {
	if !cas.ValidRootName(name) {
		return cas.Digest{}, fmt.Errorf("%w: %q", cas.ErrBadName, name)
	}
	key, _ := rootKey(name)
	var ar *repb.ActionResult
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		ar, err = c.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: c.opts.Instance, ActionDigest: pb(key), DigestFunction: repb.DigestFunction_SHA256})
		return err
	})
	if status.Code(err) == codes.NotFound {
		return cas.Digest{}, fmt.Errorf("%w: %s", ErrNoRoot, name)
	}
	if err != nil {
		return cas.Digest{}, fmt.Errorf("remote: GetActionResult: %w", err)
	}
	for _, od := range ar.GetOutputDirectories() {
		if od.GetPath() != "root" {
			continue
		}
		td, err := fromPB(od.GetTreeDigest())
		if err != nil {
			return cas.Digest{}, err
		}
		tree, err := c.readTree(ctx, name, td)
		if err != nil {
			return cas.Digest{}, err
		}
		return treeRoot(name, tree)
	}
	return cas.Digest{}, fmt.Errorf("remote: the entry for %s has no output directory \"root\"", name)
}

// readTree reads the Tree td of root name and checks it against its digest.
func (c *Client) readTree(ctx context.Context, name string, td cas.Digest) ([]byte, error) {
	var tree []byte
	err := c.retry(ctx, func(ctx context.Context) error {
		resp, err := c.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{InstanceName: c.opts.Instance, Digests: []*repb.Digest{pb(td)}, DigestFunction: repb.DigestFunction_SHA256})
		if err != nil {
			return err
		}
		for _, r := range resp.GetResponses() {
			if r.GetStatus().GetCode() != 0 {
				return status.Error(codes.Code(r.GetStatus().GetCode()), r.GetStatus().GetMessage())
			}
			tree = r.GetData()
		}
		return nil
	})
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%w: tree of %s", ErrMissing, name)
	}
	if err != nil {
		return nil, fmt.Errorf("remote: read tree of %s: %w", name, err)
	}
	if cas.DigestOf(tree) != td {
		return nil, fmt.Errorf("%w: the tree of %s does not match its digest", ErrMismatch, name)
	}
	return tree, nil
}

// treeRoot is the digest of the first record of the Tree of root name: the
// root directory (tag 0x0a, length, bytes).
func treeRoot(name string, tree []byte) (cas.Digest, error) {
	if len(tree) == 0 || tree[0] != 0x0a {
		return cas.Digest{}, fmt.Errorf("remote: the tree of %s has no root record", name)
	}
	n, k := binary.Uvarint(tree[1:])
	if k <= 0 || n > uint64(len(tree)-1-k) {
		return cas.Digest{}, fmt.Errorf("remote: the tree of %s is malformed", name)
	}
	return cas.DigestOf(tree[1+k : 1+k+int(n)]), nil
}
