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
	seenD := map[cas.Digest]bool{}
	seenF := map[cas.Digest]bool{}
	var files []cas.Digest
	level := []cas.Digest{root}
	for len(level) > 0 {
		var lack []cas.Digest
		for _, d := range level {
			if ok, err := st.Has(d); err != nil {
				return ts, err
			} else if ok {
				continue
			}
			if b, ok := pre[d]; ok {
				if err := bud.charge(int64(len(b))); err != nil {
					return ts, err
				}
				if _, err := st.PutBytes(ctx, b); err != nil {
					return ts, err
				}
				ts.TreeDirs++
				continue
			}
			lack = append(lack, d)
		}
		ts.Missing += len(lack)
		if err := c.fetch(ctx, st, lack, &ts, bud); err != nil {
			return ts, err
		}
		var next []cas.Digest
		for _, d := range level {
			ts.Blobs++
			b, err := st.ReadBlob(ctx, d, 64<<20)
			if err != nil {
				return ts, err
			}
			dir, err := cas.DecodeDirectory(b)
			if err != nil {
				return ts, fmt.Errorf("remote: directory %s: %w", d, err)
			}
			for _, f := range dir.Files {
				if !seenF[f.Digest] {
					seenF[f.Digest] = true
					files = append(files, f.Digest)
				}
			}
			for _, s := range dir.Dirs {
				if !seenD[s.Digest] {
					seenD[s.Digest] = true
					next = append(next, s.Digest)
				}
			}
		}
		level = next
	}
	ts.Blobs += len(files)
	var lack []cas.Digest
	for _, d := range files {
		if ok, err := st.Has(d); err != nil {
			return ts, err
		} else if !ok {
			lack = append(lack, d)
		}
	}
	ts.Missing += len(lack)
	return ts, c.fetch(ctx, st, lack, &ts, bud)
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
	var total int64
	for _, d := range ds {
		if total += d.Size; d.Size < 0 || total < 0 {
			return bud.charge(-1)
		}
	}
	if err := bud.charge(total); err != nil {
		return err
	}
	var small, large []cas.Digest
	for _, d := range ds {
		ts.Bytes += d.Size
		if c.batchable(d.Size) {
			small = append(small, d)
		} else {
			large = append(large, d)
		}
	}
	ts.Batched += len(small)
	ts.Streams += len(large)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, c.opts.Concurrency)
	)
	run := func(fn func() error) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	for i := 0; i < len(small) && ctx.Err() == nil; {
		var group []cas.Digest
		var total int64
		for i < len(small) && (len(group) == 0 || total+small[i].Size+1024 <= c.maxBatch) {
			group = append(group, small[i])
			total += small[i].Size + 1024
			i++
		}
		run(func() error { return c.batchRead(ctx, st, group) })
	}
	for _, d := range large {
		if ctx.Err() != nil {
			break
		}
		run(func() error { return c.streamRead(ctx, st, d) })
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
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
		var tree []byte
		err = c.retry(ctx, func(ctx context.Context) error {
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
			return cas.Digest{}, fmt.Errorf("%w: tree of %s", ErrMissing, name)
		}
		if err != nil {
			return cas.Digest{}, fmt.Errorf("remote: read tree of %s: %w", name, err)
		}
		if cas.DigestOf(tree) != td {
			return cas.Digest{}, fmt.Errorf("%w: the tree of %s does not match its digest", ErrMismatch, name)
		}
		// The first record is the root directory: tag 0x0a, length, bytes.
		if len(tree) == 0 || tree[0] != 0x0a {
			return cas.Digest{}, fmt.Errorf("remote: the tree of %s has no root record", name)
		}
		n, k := binary.Uvarint(tree[1:])
		if k <= 0 || n > uint64(len(tree)-1-k) {
			return cas.Digest{}, fmt.Errorf("remote: the tree of %s is malformed", name)
		}
		return cas.DigestOf(tree[1+k : 1+k+int(n)]), nil
	}
	return cas.Digest{}, fmt.Errorf("remote: the entry for %s has no output directory \"root\"", name)
}
