// Package remote moves trees of a local cas.Store to and from a server speaking
// the Remote Execution API v2 (REAPI) — bazel-remote, Buildbarn, BuildBuddy,
// NativeLink — over gRPC, and names them there as Action Cache entries, so that
// another machine can fetch a snapshot by name. It is the only package of capfs
// that imports gRPC.
//
// Guarantees:
//   - Blobs are sent and received with FindMissingBlobs, BatchUpdateBlobs and
//     BatchReadBlobs for blobs that fit the server's batch limit, and ByteStream
//     for larger ones, with "compressed-blobs/zstd" resource names when the
//     server lists ZSTD among its compressors (GetCapabilities). Directories are
//     prefetched with GetTree.
//   - Everything received is checked against its digest before it is stored
//     (cas.Store.PutDigest): a server cannot plant wrong bytes under a digest.
//   - Upload first asks FindMissingBlobs for the whole tree and sends only what
//     is missing, so it also repairs what the server evicted; SaveRoot uploads
//     before it names, so a name never points at a tree the server lacks at that
//     moment. Servers evict later too: Download fails with ErrMissing (naming a
//     digest) when the server no longer holds part of a tree.
//   - Transient failures (UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED,
//     DEADLINE_EXCEEDED of one attempt, a broken connection) are retried with
//     exponential backoff (Options.Retries, Options.MaxBackoff), a ByteStream
//     upload from its start. A digest mismatch is not retried: servers report it
//     as INVALID_ARGUMENT (the specification) or INTERNAL (bazel-remote), and
//     both are returned as an error matching ErrMismatch.
//
// Named roots: SaveRoot stores an ActionResult whose one output directory
// ("root") is the tree, under the digest of an Action whose Command is
// ["capfs-cas-root", NAME], so any client computes the same key from the name.
// The Tree message is written in the topologically sorted record form with the
// Directory messages' exact bytes, so FetchRoot recovers the root digest
// without re-encoding anything.
package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/vfs"
)

// ErrMismatch is matched by errors reporting that the server refused a blob as
// not matching its digest (INVALID_ARGUMENT or INTERNAL on upload).
var ErrMismatch = errors.New("remote: digest mismatch")

// ErrMissing is matched by errors reporting a blob the server does not hold.
var ErrMissing = errors.New("remote: blob missing on the server")

// ErrNoRoot is matched by FetchRoot's error for a name the server has no entry for.
var ErrNoRoot = errors.New("remote: no such root on the server")

// Options configure Dial.
type Options struct {
	// Instance is the REAPI instance name ("" for the default instance).
	Instance string
	// TLS, when set, is used for the connection; otherwise it is plaintext (for a
	// cache on localhost or a trusted network).
	TLS credentials.TransportCredentials
	// Retries is how many times a failed call is retried (default 8).
	Retries int
	// MaxBackoff bounds the wait between retries (default 2s; the first is 50ms).
	MaxBackoff time.Duration
	// Concurrency is how many uploads or downloads run at once (default 4).
	Concurrency int
	// OnBlob, when set, is called after each blob is uploaded or downloaded
	// (tests use it to interrupt a transfer). It must not block for long.
	OnBlob func(d cas.Digest)
	// MaxDownloadBytes bounds the bytes one Download may bring into the store
	// (default [DefaultMaxDownload]); past it Download fails with an error
	// matching [ErrBudget].
	MaxDownloadBytes int64
}

// DefaultMaxDownload is the download budget when Options.MaxDownloadBytes is
// not set: larger than a project snapshot, smaller than a disk.
const DefaultMaxDownload = 16 << 30

// ErrBudget is matched by Download's error when the tree needs more bytes than
// its budget (Options.MaxDownloadBytes). It has the stable code
// quota_exceeded, so errors.Is(err, vfs.ErrQuota) matches too.
var ErrBudget = &vfs.Error{Code: vfs.CodeQuota, Op: "remote download", Err: errors.New("more bytes than the download budget")}

// Client talks to one REAPI server. It is safe for concurrent use.
type Client struct {
	conn     *grpc.ClientConn
	cas      repb.ContentAddressableStorageClient
	ac       repb.ActionCacheClient
	bs       bspb.ByteStreamClient
	caps     repb.CapabilitiesClient
	opts     Options
	capsMu   sync.Mutex // guards capsDone; maxBatch and zstd are set before it is
	capsDone bool
	maxBatch int64
	zstd     bool
}

// Dial connects to target ("host:port", or "grpc://host:port"; "grpcs://"
// requires Options.TLS). The connection is made lazily; the server's
// capabilities are asked for at the first transfer.
func Dial(target string, opts Options) (*Client, error) {
	if opts.Retries == 0 {
		opts.Retries = 8
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 2 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.MaxDownloadBytes <= 0 {
		opts.MaxDownloadBytes = DefaultMaxDownload
	}
	target = strings.TrimPrefix(strings.TrimPrefix(target, "grpc://"), "grpcs://")
	creds := opts.TLS
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("remote: dial %s: %w", target, err)
	}
	return &Client{conn: conn, cas: repb.NewContentAddressableStorageClient(conn), ac: repb.NewActionCacheClient(conn),
		bs: bspb.NewByteStreamClient(conn), caps: repb.NewCapabilitiesClient(conn), opts: opts}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// capabilities asks the server for its batch limit and compressors, once it
// answers; every transfer calls it first.
func (c *Client) capabilities(ctx context.Context) error {
	c.capsMu.Lock()
	defer c.capsMu.Unlock()
	if c.capsDone {
		return nil
	}
	maxBatch, zstdOK := int64(4<<20), false
	err := c.retry(ctx, func(ctx context.Context) error {
		sc, err := c.caps.GetCapabilities(ctx, &repb.GetCapabilitiesRequest{InstanceName: c.opts.Instance})
		if err != nil {
			return err
		}
		if cc := sc.GetCacheCapabilities(); cc != nil {
			if n := cc.GetMaxBatchTotalSizeBytes(); n > 0 && n < maxBatch {
				maxBatch = n
			}
			for _, comp := range cc.GetSupportedCompressors() {
				if comp == repb.Compressor_ZSTD {
					zstdOK = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.maxBatch, c.zstd, c.capsDone = maxBatch, zstdOK, true
	return nil
}

// retryable reports whether a call that failed with err may succeed if repeated.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded:
		return true
	}
	return false
}

// retry runs fn until it succeeds, fails for good, or the retries run out.
func (c *Client) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	wait := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := fn(ctx)
		if err == nil || !retryable(err) || attempt >= c.opts.Retries {
			return err
		}
		j, _ := rand.Int(rand.Reader, big.NewInt(int64(wait/2)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait/2 + time.Duration(j.Int64())):
		}
		wait = min(2*wait, c.opts.MaxBackoff)
	}
}

// mismatch reports whether an upload failure means the server computed another
// digest for the bytes.
func mismatch(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Internal:
		return true
	}
	return false
}

func pb(d cas.Digest) *repb.Digest { return &repb.Digest{Hash: d.Hex(), SizeBytes: d.Size} }

func fromPB(d *repb.Digest) (cas.Digest, error) {
	if d == nil {
		return cas.Digest{}, fmt.Errorf("%w: missing digest", cas.ErrBadDigest)
	}
	return cas.ParseDigest(fmt.Sprintf("%s/%d", d.GetHash(), d.GetSizeBytes()))
}

// treeBlobs lists every blob of the local tree root: directories first (root
// first, each once), then the file blobs, each once.
func treeBlobs(ctx context.Context, st *cas.Store, root cas.Digest) (dirs []cas.Digest, raw map[cas.Digest][]byte, files []cas.Digest, err error) {
	raw = map[cas.Digest][]byte{}
	seenF := map[cas.Digest]bool{}
	queue := []cas.Digest{root}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if _, ok := raw[d]; ok {
			continue
		}
		b, err := st.ReadBlob(ctx, d, 64<<20)
		if err != nil {
			return nil, nil, nil, err
		}
		dir, err := cas.DecodeDirectory(b)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("directory %s: %w", d, err)
		}
		raw[d] = b
		dirs = append(dirs, d)
		for _, f := range dir.Files {
			if !seenF[f.Digest] {
				seenF[f.Digest] = true
				files = append(files, f.Digest)
			}
		}
		for _, s := range dir.Dirs {
			queue = append(queue, s.Digest)
		}
	}
	return dirs, raw, files, nil
}

// findMissing asks the server which of ds it lacks.
func (c *Client) findMissing(ctx context.Context, ds []cas.Digest) ([]cas.Digest, error) {
	var out []cas.Digest
	for len(ds) > 0 {
		n := min(len(ds), 10000)
		req := &repb.FindMissingBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
		for _, d := range ds[:n] {
			req.BlobDigests = append(req.BlobDigests, pb(d))
		}
		var resp *repb.FindMissingBlobsResponse
		err := c.retry(ctx, func(ctx context.Context) error {
			var err error
			resp, err = c.cas.FindMissingBlobs(ctx, req)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("remote: FindMissingBlobs: %w", err)
		}
		for _, m := range resp.GetMissingBlobDigests() {
			d, err := fromPB(m)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		ds = ds[n:]
	}
	return out, nil
}

// TransferStats reports what Upload or Download moved.
type TransferStats struct {
	Blobs   int   // blobs in the tree (directories and distinct files)
	Missing int   // blobs the other side lacked
	Bytes   int64 // their total size
	Batched int   // of those, sent or received in batch calls
	Streams int   // of those, through ByteStream
	// TreeDirs is how many directories GetTree supplied (Download only).
	TreeDirs int
}

// batchable reports whether a blob of size n fits a batch call.
func (c *Client) batchable(n int64) bool { return n+1024 <= c.maxBatch }

// Upload makes the server hold every blob of the local tree root: it asks which
// are missing and sends those. It is also the check a client makes before
// trusting a name on a server that evicts.
func (c *Client) Upload(ctx context.Context, st *cas.Store, root cas.Digest) (TransferStats, error) {
	var ts TransferStats
	if err := c.capabilities(ctx); err != nil {
		return ts, fmt.Errorf("remote: GetCapabilities: %w", err)
	}
	dirs, _, files, err := treeBlobs(ctx, st, root)
	if err != nil {
		return ts, err
	}
	all := append([]cas.Digest{}, dirs...)
	inDirs := map[cas.Digest]bool{}
	for _, d := range dirs {
		inDirs[d] = true
	}
	for _, f := range files {
		if !inDirs[f] { // an empty file and an empty directory share a digest
			all = append(all, f)
		}
	}
	ts.Blobs = len(all)
	missing, err := c.findMissing(ctx, all)
	if err != nil {
		return ts, err
	}
	ts.Missing = len(missing)
	return ts, c.send(ctx, st, missing, &ts)
}

// send uploads blobs ds from st.
func (c *Client) send(ctx context.Context, st *cas.Store, ds []cas.Digest, ts *TransferStats) error {
	small, large := c.bySize(ds, ts)
	ts.Batched, ts.Streams = len(small), len(large)
	jobs := make(chan func() error)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range c.opts.Concurrency {
		wg.Go(func() { sendWorker(jobs, errc, cancel) })
	}
	c.feedUploads(ctx, st, jobs, small, large)
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	return ctx.Err()
}

// bySize splits ds into blobs small enough for a batch and the others,
// counting their bytes in ts.
func (c *Client) bySize(ds []cas.Digest, ts *TransferStats) (small, large []cas.Digest) {
	for _, d := range ds {
		ts.Bytes += d.Size
		if c.batchable(d.Size) {
			small = append(small, d)
		} else {
			large = append(large, d)
		}
	}
	return small, large
}

// sendWorker runs upload jobs; the first error goes to errc (the others are
// dropped) and cancels the rest.
func sendWorker(jobs <-chan func() error, errc chan<- error, cancel func()) {
	for j := range jobs {
		if err := j(); err != nil {
			select {
			case errc <- err:
			default:
			}
			cancel()
		}
	}
}

// feedUploads hands the uploads to the workers, the small blobs in batches
// first, until ctx ends.
func (c *Client) feedUploads(ctx context.Context, st *cas.Store, jobs chan<- func() error, small, large []cas.Digest) {
	feed := func(j func() error) bool {
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, group := range c.batches(small) {
		if !feed(func() error { return c.batchUpload(ctx, st, group) }) {
			return
		}
	}
	for _, d := range large {
		if !feed(func() error { return c.streamUpload(ctx, st, d) }) {
			return
		}
	}
}

func (c *Client) batchUpload(ctx context.Context, st *cas.Store, ds []cas.Digest) error {
	data := map[cas.Digest][]byte{}
	for _, d := range ds {
		b, err := st.ReadBlob(ctx, d, -1)
		if err != nil {
			return err
		}
		data[d] = b
	}
	return c.batchUploadData(ctx, data)
}

// batchUploadData sends blobs in one BatchUpdateBlobs call (repeated for the
// blobs a transient failure left out).
func (c *Client) batchUploadData(ctx context.Context, data map[cas.Digest][]byte) error {
	pending := map[cas.Digest]*repb.BatchUpdateBlobsRequest_Request{}
	for d, b := range data {
		pending[d] = &repb.BatchUpdateBlobsRequest_Request{Digest: pb(d), Data: b}
	}
	return c.retry(ctx, func(ctx context.Context) error {
		req := &repb.BatchUpdateBlobsRequest{InstanceName: c.opts.Instance, DigestFunction: repb.DigestFunction_SHA256}
		for _, r := range pending {
			req.Requests = append(req.Requests, r)
		}
		resp, err := c.cas.BatchUpdateBlobs(ctx, req)
		if err != nil {
			return err
		}
		var again error
		for _, r := range resp.GetResponses() {
			d, err := fromPB(r.GetDigest())
			if err != nil {
				return err
			}
			code := codes.Code(r.GetStatus().GetCode())
			switch {
			case code == codes.OK:
				delete(pending, d)
				if c.opts.OnBlob != nil {
					c.opts.OnBlob(d)
				}
			case code == codes.InvalidArgument || code == codes.Internal:
				return fmt.Errorf("%w: server refused %s: %s", ErrMismatch, d, r.GetStatus().GetMessage())
			default:
				again = status.Error(code, r.GetStatus().GetMessage())
			}
		}
		if again == nil && len(pending) > 0 {
			again = status.Error(codes.Unavailable, "server answered for fewer blobs than sent")
		}
		return again
	})
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (c *Client) prefix() string {
	if c.opts.Instance == "" {
		return ""
	}
	return c.opts.Instance + "/"
}

// streamUpload writes one blob through ByteStream, compressed with zstd when the
// server supports it; a failed attempt starts again from the beginning.
func (c *Client) streamUpload(ctx context.Context, st *cas.Store, d cas.Digest) error {
	err := c.retry(ctx, func(ctx context.Context) error {
		return c.streamUploadOnce(ctx, st, d)
	})
	if err != nil {
		if mismatch(err) {
			return fmt.Errorf("%w: server refused %s: %v", ErrMismatch, d, err)
		}
		return fmt.Errorf("remote: upload %s: %w", d, err)
	}
	if c.opts.OnBlob != nil {
		c.opts.OnBlob(d)
	}
	return nil
}

// streamUploadOnce is one attempt of streamUpload.
func (c *Client) streamUploadOnce(ctx context.Context, st *cas.Store, d cas.Digest) error {
	name := fmt.Sprintf("%suploads/%s/blobs/%s/%d", c.prefix(), uuid(), d.Hex(), d.Size)
	if c.zstd {
		name = fmt.Sprintf("%suploads/%s/compressed-blobs/zstd/%s/%d", c.prefix(), uuid(), d.Hex(), d.Size)
	}
	rc, err := st.OpenBlob(ctx, d)
	if err != nil {
		return err
	}
	defer rc.Close()
	var src io.Reader = rc
	if c.zstd {
		pr := zstdPipe(rc)
		defer pr.Close()
		src = pr
	}
	ws, err := c.bs.Write(ctx)
	if err != nil {
		return err
	}
	return writeStream(ws, name, src)
}

// zstdPipe is rc compressed with zstd (fastest level), as it is read.
func zstdPipe(rc io.Reader) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		zw, err := zstd.NewWriter(pw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err == nil {
			_, err = io.Copy(zw, rc)
			if cerr := zw.Close(); err == nil {
				err = cerr
			}
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// writeStream sends what src reads to resource name through ws, in 1 MiB
// writes, and returns the server's answer.
func writeStream(ws bspb.ByteStream_WriteClient, name string, src io.Reader) error {
	buf := make([]byte, 1<<20)
	var off int64
	first := true
	for {
		n, rerr := io.ReadFull(src, buf)
		last := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !last {
			ws.CloseSend()
			return rerr // a local read failure (corrupt blob): not retryable
		}
		req := &bspb.WriteRequest{WriteOffset: off, Data: buf[:n], FinishWrite: last}
		if first {
			req.ResourceName = name
			first = false
		}
		if err := ws.Send(req); err != nil {
			if err == io.EOF {
				// The server ended the stream: its status says why.
				_, err = ws.CloseAndRecv()
				if err == nil {
					return nil // already committed (the server had it)
				}
			}
			return err
		}
		off += int64(n)
		if last {
			break
		}
	}
	_, err := ws.CloseAndRecv()
	return err
}
