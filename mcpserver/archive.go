package mcpserver

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/capfs/capfs/archive"
)

type extractIn struct {
	Path      string `json:"path" jsonschema:"the archive file in the namespace: zip, tar, tar.gz or tar.zst (detected from its first bytes)"`
	Dest      string `json:"dest" jsonschema:"the existing directory to extract into"`
	Overwrite bool   `json:"overwrite,omitempty" jsonschema:"let a file replace an existing regular file of dest"`
	Links     bool   `json:"links,omitempty" jsonschema:"extract symlinks and hard links whose target stays inside dest (left out by default)"`
	Strict    bool   `json:"strict,omitempty" jsonschema:"refuse the whole archive if any entry would be left out"`
}

type extractedItem struct {
	Path string `json:"path" jsonschema:"the path extracted, relative to dest"`
	Type string `json:"type" jsonschema:"file, dir, symlink or hardlink"`
	Size int64  `json:"size,omitempty" jsonschema:"a file's size in bytes"`
	Mode string `json:"mode" jsonschema:"the permission bits it was given (clamped: never setuid, at most 0755)"`
}

type filteredItem struct {
	Name   string `json:"name" jsonschema:"the entry's name as stored in the archive (control characters escaped)"`
	Reason string `json:"reason" jsonschema:"why it was left out (traversal, absolute, symlink, policy, exists, ...)"`
	Detail string `json:"detail,omitempty" jsonschema:"more about why"`
}

type extractOut struct {
	Extracted []extractedItem `json:"extracted" jsonschema:"what was written into dest"`
	Filtered  []filteredItem  `json:"filtered" jsonschema:"what was left out, and why"`
	Entries   int             `json:"entries" jsonschema:"entries read from the archive"`
	Bytes     int64           `json:"bytes" jsonschema:"file bytes extracted"`
}

// extract is the extract_archive tool: archive.ExtractDirFile, every entry decided
// before anything is written, and the merge made of ordinary checked calls
// carrying the archive purpose (a policy may refuse archives as such).
func (s *server) extract(ctx context.Context, in extractIn) (extractOut, string, error) {
	opts := archive.Options{Overwrite: in.Overwrite, Strict: in.Strict}
	if in.Links {
		opts.Links = archive.LinksInside
	}
	res, err := archive.ExtractDirFile(ctx, s.root, in.Path, in.Dest, opts)
	if err != nil {
		return extractOut{}, "", err
	}
	out := extractOut{Entries: res.Entries, Bytes: res.Bytes, Extracted: []extractedItem{}, Filtered: []filteredItem{}}
	var b strings.Builder
	fmt.Fprintf(&b, "extracted %d of %d entries (%d bytes) into %s\n", len(res.Extracted), res.Entries, res.Bytes, esc(in.Dest))
	for _, it := range res.Extracted {
		out.Extracted = append(out.Extracted, extractedItem{Path: it.Path, Type: it.Type, Size: it.Size, Mode: fmt.Sprintf("%04o", it.Mode&fs.ModePerm)})
		if len(out.Extracted) <= s.opts.HeadLimit {
			fmt.Fprintf(&b, "  x %s\n", esc(it.Path))
		}
	}
	if n := len(res.Extracted) - s.opts.HeadLimit; n > 0 {
		fmt.Fprintf(&b, "  ... and %d more (see structuredContent)\n", n)
	}
	for _, f := range res.Filtered {
		out.Filtered = append(out.Filtered, filteredItem{Name: f.Name, Reason: string(f.Reason), Detail: f.Detail})
		fmt.Fprintf(&b, "  - %s: left out (%s", esc(f.Name), f.Reason)
		if f.Detail != "" {
			fmt.Fprintf(&b, ": %s", esc(f.Detail))
		}
		b.WriteString(")\n")
	}
	return out, b.String(), nil
}
