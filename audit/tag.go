package audit

import "context"

// tagKey is the context key of a request tag.
type tagKey struct{}

// maxTagLen bounds a tag copied into events.
const maxTagLen = 256

// WithRequestTag returns a copy of ctx carrying tag.
// tag names the outer request (an MCP tool call, an RPC) on whose behalf
// capability calls made with that context run. Package dir copies it into
// Event.Tag of every event such a call produces, so a trail can be grouped by
// the request that caused it. Tags longer than 256 bytes are cut. The tag is for
// correlation only: it grants nothing and is not seen by policies.
func WithRequestTag(ctx context.Context, tag string) context.Context {
	if len(tag) > maxTagLen {
		tag = tag[:maxTagLen]
	}
	return context.WithValue(ctx, tagKey{}, tag)
}

// RequestTag returns the tag WithRequestTag set on ctx, or "".
func RequestTag(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	s, _ := ctx.Value(tagKey{}).(string)
	return s
}

// DefaultTag returns a sink that records every event to sink, with Tag set to
// tag when the call's context gave it none. It is the tag of a whole session (a
// capfs run). The tags of its requests, if any, still show.
func DefaultTag(sink Sink, tag string) Sink {
	if len(tag) > maxTagLen {
		tag = tag[:maxTagLen]
	}
	return &defaultTag{sink: sink, tag: tag} // a pointer: comparable, as Batch compares sinks
}

type defaultTag struct {
	sink Sink
	tag  string
}

func (d *defaultTag) Record(ctx context.Context, e Event) {
	if e.Tag == "" {
		e.Tag = d.tag
	}
	d.sink.Record(ctx, e)
}
