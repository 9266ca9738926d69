package remote

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/capfs/capfs/backends/cas"
)

// hostileServer is a CAS server that holds a small tree's blobs but answers
// GetTree with directories of no tree, page after page, without end.
type hostileServer struct {
	repb.UnimplementedContentAddressableStorageServer
	repb.UnimplementedCapabilitiesServer
	blobs map[cas.Digest][]byte
	sent  atomic.Int64 // directories streamed
}

func (h *hostileServer) GetCapabilities(context.Context, *repb.GetCapabilitiesRequest) (*repb.ServerCapabilities, error) {
	return &repb.ServerCapabilities{CacheCapabilities: &repb.CacheCapabilities{MaxBatchTotalSizeBytes: 4 << 20}}, nil
}

func (h *hostileServer) GetTree(req *repb.GetTreeRequest, stream grpc.ServerStreamingServer[repb.GetTreeResponse]) error {
	for i := 0; ; i++ {
		var dirs []*repb.Directory
		for j := range 100 {
			n := h.sent.Add(1)
			dirs = append(dirs, &repb.Directory{Symlinks: []*repb.SymlinkNode{{Name: fmt.Sprintf("junk%d", n), Target: fmt.Sprint(j)}}})
		}
		if err := stream.Send(&repb.GetTreeResponse{Directories: dirs, NextPageToken: fmt.Sprint("page", i)}); err != nil {
			return err
		}
	}
}

func (h *hostileServer) BatchReadBlobs(_ context.Context, req *repb.BatchReadBlobsRequest) (*repb.BatchReadBlobsResponse, error) {
	resp := &repb.BatchReadBlobsResponse{}
	for _, d := range req.GetDigests() {
		dg, err := fromPB(d)
		if err != nil {
			return nil, err
		}
		resp.Responses = append(resp.Responses, &repb.BatchReadBlobsResponse_Response{Digest: d, Data: h.blobs[dg], Status: nil})
	}
	return resp, nil
}

// TestDownloadHostileGetTree: a server whose GetTree streams directories
// without end makes Download keep at most maxPrefetch of them in memory and
// store none that the tree does not reach; the tree still arrives. On
// 8a35f16 Download stored every streamed directory and never returned (the
// deadline here ends it).
func TestDownloadHostileGetTree(t *testing.T) {
	defer func(n int) { maxPrefetch = n }(maxPrefetch)
	maxPrefetch = 1 << 20
	file := []byte("the one file")
	rootMsg, err := proto.MarshalOptions{Deterministic: true}.Marshal(&repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: pb(cas.DigestOf(file))}}})
	if err != nil {
		t.Fatal(err)
	}
	root := cas.DigestOf(rootMsg)
	h := &hostileServer{blobs: map[cas.Digest][]byte{root: rootMsg, cas.DigestOf(file): file}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	repb.RegisterContentAddressableStorageServer(srv, h)
	repb.RegisterCapabilitiesServer(srv, h)
	go srv.Serve(lis)
	defer srv.Stop()
	c, err := Dial(lis.Addr().String(), Options{Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Download(ctx, st, root); err != nil {
		t.Fatalf("Download: %v (after %d streamed directories)", err, h.sent.Load())
	}
	if err := st.VerifyTree(ctx, root); err != nil {
		t.Fatal(err)
	}
	junk, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&repb.Directory{Symlinks: []*repb.SymlinkNode{{Name: "junk1", Target: "0"}}})
	if ok, _ := st.Has(cas.DigestOf(junk)); ok {
		t.Fatal("a directory of no tree was stored")
	}
}
