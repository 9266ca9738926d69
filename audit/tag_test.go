package audit

import (
	"context"
	"strings"
	"testing"
)

func TestRequestTag(t *testing.T) {
	ctx := context.Background()
	if got := RequestTag(ctx); got != "" {
		t.Fatalf("untagged context: got %q", got)
	}
	if got := RequestTag(WithRequestTag(ctx, "mcp:1")); got != "mcp:1" {
		t.Fatalf("got %q, want mcp:1", got)
	}
	long := strings.Repeat("x", 1000)
	if got := RequestTag(WithRequestTag(ctx, long)); len(got) != maxTagLen {
		t.Fatalf("long tag kept %d bytes, want %d", len(got), maxTagLen)
	}
}
