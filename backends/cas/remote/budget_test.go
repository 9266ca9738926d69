package remote

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/capfs/capfs/backends/cas"
	"github.com/capfs/capfs/vfs"
)

// bigServer holds a tree's directories and answers any other blob asked of it
// with zeros: up to streamCap bytes of a ByteStream read (then the stream
// ends), the declared size of a batched one. sent counts the file bytes it
// answered.
type bigServer struct {
	repb.UnimplementedContentAddressableStorageServer
	repb.UnimplementedCapabilitiesServer
	bspb.UnimplementedByteStreamServer
	mu    sync.Mutex // guards blobs (a fuzz target swaps them)
	blobs map[cas.Digest][]byte
	sent  atomic.Int64
}

func (h *bigServer) blob(d cas.Digest) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.blobs[d]
	return b, ok
}

const streamCap = 8 << 20

func (h *bigServer) GetCapabilities(context.Context, *repb.GetCapabilitiesRequest) (*repb.ServerCapabilities, error) {
	return &repb.ServerCapabilities{CacheCapabilities: &repb.CacheCapabilities{MaxBatchTotalSizeBytes: 4 << 20}}, nil
}

func (h *bigServer) GetTree(*repb.GetTreeRequest, grpc.ServerStreamingServer[repb.GetTreeResponse]) error {
	return nil // no directory prefetched: each is read as a blob
}

func (h *bigServer) BatchReadBlobs(_ context.Context, req *repb.BatchReadBlobsRequest) (*repb.BatchReadBlobsResponse, error) {
	resp := &repb.BatchReadBlobsResponse{}
	for _, d := range req.GetDigests() {
		dg, err := fromPB(d)
		if err != nil {
			return nil, err
		}
		data, ok := h.blob(dg)
		if !ok {
			h.sent.Add(dg.Size)
			if dg.Size > 16<<20 {
				return nil, status.Error(codes.InvalidArgument, "more than a batch holds")
			}
			data = make([]byte, dg.Size)
		}
		resp.Responses = append(resp.Responses, &repb.BatchReadBlobsResponse_Response{Digest: d, Data: data})
	}
	return resp, nil
}

func (h *bigServer) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	chunk := make([]byte, 64<<10)
	for n := 0; n < streamCap; n += len(chunk) {
		h.sent.Add(int64(len(chunk)))
		if err := stream.Send(&bspb.ReadResponse{Data: chunk}); err != nil {
			return err
		}
	}
	return status.Error(codes.DataLoss, "the hostile server stops here")
}

// serveBig starts h on a local port and returns a client of it.
func serveBig(t testing.TB, h *bigServer, opts Options) *Client {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	repb.RegisterContentAddressableStorageServer(srv, h)
	repb.RegisterCapabilitiesServer(srv, h)
	bspb.RegisterByteStreamServer(srv, h)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	opts.Retries = 1
	c, err := Dial(lis.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// treeNaming returns a server holding one root directory that names files of
// the given sizes (digests of no content the server has), and the root.
func treeNaming(t *testing.T, sizes ...int64) (*bigServer, cas.Digest) {
	t.Helper()
	dir := &repb.Directory{}
	for i, n := range sizes {
		h := sha256.Sum256([]byte{byte(i)})
		dir.Files = append(dir.Files, &repb.FileNode{Name: string(rune('a' + i)), Digest: pb(cas.Digest{Hash: h, Size: n})})
	}
	msg, err := proto.MarshalOptions{Deterministic: true}.Marshal(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := cas.DigestOf(msg)
	return &bigServer{blobs: map[cas.Digest][]byte{root: msg}}, root
}

// checkUntorn fails t unless st holds only whole, verified blobs and no
// temporary file.
func checkUntorn(t testing.TB, st *cas.Store) {
	t.Helper()
	rep, err := st.Verify(bg, false)
	if err != nil || len(rep.Corrupt) > 0 {
		t.Errorf("store after the refused download: %v, corrupt %v", err, rep.Corrupt)
	}
	filepath.WalkDir(st.Dir(), func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && filepath.Base(filepath.Dir(p)) == "tmp" {
			t.Errorf("a temporary file is left: %s", p)
		}
		return nil
	})
}

// TestDownloadBudgetDeclared: a tree whose files declare more bytes than the
// download budget (one huge blob, or several large ones) is refused with a
// quota_exceeded error before a byte of them is asked for, and the store is
// left with whole blobs only. Before the budget, Download streamed each blob
// into the store until the server stopped.
func TestDownloadBudgetDeclared(t *testing.T) {
	for name, sizes := range map[string][]int64{
		"one huge blob":   {1 << 40},
		"many large ones": {6 << 30, 6 << 30, 6 << 30},
	} {
		t.Run(name, func(t *testing.T) {
			h, root := treeNaming(t, sizes...)
			c := serveBig(t, h, Options{})
			st := newStore(t)
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			defer cancel()
			_, err := c.Download(ctx, st, root)
			if !errors.Is(err, vfs.ErrQuota) {
				t.Errorf("Download: %v, want quota_exceeded", err)
			}
			if n := h.sent.Load(); n != 0 {
				t.Errorf("the server was asked for %d bytes of the files", n)
			}
			checkUntorn(t, st)
		})
	}
}

// TestDownloadBudgetOption: Options.MaxDownloadBytes sets the budget. Files
// over it are refused before any is asked for, a chain of directories over it
// stops where the budget ends, and a budget that covers the tree lets it
// arrive whole.
func TestDownloadBudgetOption(t *testing.T) {
	h := &bigServer{blobs: map[cas.Digest][]byte{}}
	put := func(m proto.Message) cas.Digest {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		d := cas.DigestOf(b)
		h.blobs[d] = b
		return d
	}
	files := &repb.Directory{}
	for i := range 20 {
		b := make([]byte, 10<<10)
		b[0] = byte(i)
		d := cas.DigestOf(b)
		h.blobs[d] = b
		files.Files = append(files.Files, &repb.FileNode{Name: string(rune('a' + i)), Digest: pb(d)})
	}
	flat := put(files)
	chain := put(&repb.Directory{})
	for i := range 200 {
		chain = put(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "d", Digest: pb(chain)}}, Symlinks: []*repb.SymlinkNode{{Name: "l", Target: string(rune('a' + i%26))}}})
	}
	for _, tc := range []struct {
		name   string
		root   cas.Digest
		budget int64
		ok     bool
	}{
		{"files over the budget", flat, 100 << 10, false},
		{"directories over the budget", chain, 4 << 10, false},
		{"files within the budget", flat, 1 << 20, true},
		{"directories within the budget", chain, 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.sent.Store(0)
			c := serveBig(t, h, Options{MaxDownloadBytes: tc.budget})
			st := newStore(t)
			_, err := c.Download(bg, st, tc.root)
			if tc.ok {
				if err != nil {
					t.Fatalf("Download within the budget: %v", err)
				}
				if err := st.VerifyTree(bg, tc.root); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBudget) || !errors.Is(err, vfs.ErrQuota) {
				t.Fatalf("Download: %v, want ErrBudget", err)
			}
			if blobs, _, err := st.Usage(); err != nil || tc.root == flat && blobs != 1 {
				t.Errorf("the store holds %d blobs (%v), want the root directory alone", blobs, err)
			}
			checkUntorn(t, st)
		})
	}
}

// zstdServer answers every ByteStream read with zstd skippable frames and
// nothing else, up to 256 MiB: a compressed blob that never yields a byte.
type zstdServer struct {
	*bigServer
}

func (h *zstdServer) GetCapabilities(context.Context, *repb.GetCapabilitiesRequest) (*repb.ServerCapabilities, error) {
	return &repb.ServerCapabilities{CacheCapabilities: &repb.CacheCapabilities{MaxBatchTotalSizeBytes: 4 << 20,
		SupportedCompressors: []repb.Compressor_Value{repb.Compressor_ZSTD}}}, nil
}

func (h *zstdServer) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	frame := make([]byte, 64<<10)
	copy(frame, []byte{0x50, 0x2a, 0x4d, 0x18})
	binary.LittleEndian.PutUint32(frame[4:], uint32(len(frame)-8))
	for n := 0; n < 256<<20; n += len(frame) {
		h.sent.Add(int64(len(frame)))
		if err := stream.Send(&bspb.ReadResponse{Data: frame}); err != nil {
			return err
		}
	}
	return status.Error(codes.DataLoss, "the hostile server stops here")
}

// TestDownloadBudgetCompressedStream: a compressed ByteStream answer is
// charged as it arrives: a blob of 5 MiB whose stream is zstd frames that
// decompress to nothing is cut a little past 5 MiB (zstd's overhead), with
// ErrBudget. Before, the decoder read all the server sent (here 256 MiB; a
// server without end, for ever).
func TestDownloadBudgetCompressedStream(t *testing.T) {
	bh, root := treeNaming(t, 5<<20)
	h := &zstdServer{bigServer: bh}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	repb.RegisterContentAddressableStorageServer(srv, h)
	repb.RegisterCapabilitiesServer(srv, h)
	bspb.RegisterByteStreamServer(srv, h)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c, err := Dial(lis.Addr().String(), Options{Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	st := newStore(t)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	_, err = c.Download(ctx, st, root)
	if !errors.Is(err, ErrBudget) {
		t.Errorf("Download: %v, want ErrBudget", err)
	}
	if n := h.sent.Load(); n > 64<<20 {
		t.Errorf("the server sent %d MiB before the download stopped", n>>20)
	}
	checkUntorn(t, st)
}

// FuzzDownloadBudget downloads a tree whose root directory is arbitrary bytes
// from a server that answers any other blob with zeros of its declared size:
// whatever the root names, no more than the budget is asked of the server,
// and the store keeps only whole, verified blobs.
func FuzzDownloadBudget(f *testing.F) {
	for _, sizes := range [][]int64{{1 << 40}, {300 << 10, 300 << 10, 300 << 10}, {10, 20}} {
		dir := &repb.Directory{}
		for i, n := range sizes {
			dir.Files = append(dir.Files, &repb.FileNode{Name: string(rune('a' + i)), Digest: pb(cas.Digest{Hash: sha256.Sum256([]byte{byte(i)}), Size: n})})
		}
		dir.Directories = []*repb.DirectoryNode{{Name: "d", Digest: pb(cas.Digest{Hash: sha256.Sum256(nil), Size: 5000})}}
		msg, _ := proto.MarshalOptions{Deterministic: true}.Marshal(dir)
		f.Add(msg)
	}
	const budget = 1 << 20
	h := &bigServer{}
	c := serveBig(f, h, Options{MaxDownloadBytes: budget})
	f.Fuzz(func(t *testing.T, rootMsg []byte) {
		root := cas.DigestOf(rootMsg)
		h.mu.Lock()
		h.blobs = map[cas.Digest][]byte{root: rootMsg}
		h.mu.Unlock()
		h.sent.Store(0)
		st, err := cas.OpenStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		if _, err := c.Download(ctx, st, root); ctx.Err() != nil {
			t.Fatalf("Download still running after 20 s: %v", err)
		}
		if n := h.sent.Load(); n > budget {
			t.Fatalf("the server was asked for %d bytes, past the budget of %d", n, budget)
		}
		checkUntorn(t, st)
	})
}
