package main

import (
	"context"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/capfs/capfs/policy"
)

// fixtureGlobs are the test data directories --allow-test-fixtures opens: a
// fixture named *.pem or .env there is test input, not a secret.
var fixtureGlobs = []string{
	"**/testdata/**", "**/test/fixtures/**", "**/tests/fixtures/**", "**/__fixtures__/**",
	"**/fixtures/**", "**/test/data/**", "**/tests/data/**",
}

// secretAllow is a policy that lets through the paths matching its globs when
// the only thing refusing them is a secret pattern: for those paths the
// decision is the one the same policy makes without secret patterns, so its
// host rules (deny, ask), persistence patterns and size limit still apply.
type secretAllow struct {
	inner policy.Policy
	bare  policy.Policy // inner without secret patterns
	globs []string
}

// allowSecrets wraps p (an *policy.Engine) so that paths matching globs are
// not refused as secrets. It returns p when globs is empty.
func allowSecrets(p policy.Policy, globs []string) (policy.Policy, error) {
	if len(globs) == 0 {
		return p, nil
	}
	eng, ok := p.(*policy.Engine)
	if !ok {
		return nil, usageErrorf("--allow-secret: the policy is not a rule engine")
	}
	for _, g := range globs {
		if !doublestar.ValidatePattern(strings.TrimPrefix(g, "/")) {
			return nil, usageErrorf("--allow-secret %s: malformed glob", g)
		}
	}
	cfg := eng.Config()
	cfg.SecretPatterns = []string{}
	bare, err := policy.New(cfg)
	if err != nil {
		return nil, usageErrorf("--allow-secret: %v", err)
	}
	clean := make([]string, len(globs))
	for i, g := range globs {
		clean[i] = strings.TrimPrefix(g, "/")
	}
	return &secretAllow{inner: p, bare: bare, globs: clean}, nil
}

func (a *secretAllow) Decide(ctx context.Context, r *policy.Request) policy.Decision {
	d := a.inner.Decide(ctx, r)
	if d.Effect != policy.Deny || !strings.HasPrefix(d.Rule, "secret:") || r == nil {
		return d
	}
	if !a.allowed(r.Path) {
		return d
	}
	if r.Dest != "" && !a.allowed(r.Dest) {
		// The destination must not be a secret of its own.
		q := *r
		q.Path, q.Dest = r.Dest, ""
		if dd := a.inner.Decide(ctx, &q); dd.Effect == policy.Deny && strings.HasPrefix(dd.Rule, "secret:") {
			return d
		}
	}
	return a.bare.Decide(ctx, r)
}

func (a *secretAllow) allowed(p string) bool {
	for _, g := range a.globs {
		if ok, _ := doublestar.Match(g, p); ok {
			return true
		}
	}
	return false
}
