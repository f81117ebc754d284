package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencelock/fencelock/fence/s3fence"
)

// doctorResourceHelp is what doctor -h says of --resource.
const doctorResourceHelp = `With --resource s3://BUCKET/PREFIX, doctor audits a fenced S3 store
instead of Redis (fencelock/fence/s3fence, fencelock put): with a
throw-away object under PREFIX, deleted at the end, it proves that the
store refuses a PUT whose If-Match names an older ETag and a PUT with
If-None-Match: * on an existing object, that of concurrent PUTs with
If-Match naming the same ETag exactly one succeeds (5 rounds of 8), and
that a GET returns what was just written. A store that accepts the
headers and ignores them (some S3-compatible ones do) is critical:
fencing on it is unsafe. It needs s3:GetObject, s3:PutObject and
s3:DeleteObject under PREFIX. Exits 1 if a finding is critical, 125 if
the store cannot be used (unreachable, no such bucket, access denied).

` + s3Help

// doctorS3 is what --resource adds to doctor.
type doctorS3 struct {
	resource string
	s3       s3Flags
}

func (d *doctorS3) add(cmd *command) {
	cmd.about += "\n\n" + doctorResourceHelp
	cmd.fs.StringVar(&d.resource, "resource", "", "audit the fenced resource store `s3://BUCKET/PREFIX` instead of Redis")
	d.s3.add(cmd, false)
}

// resourceReport is doctor's report on a fenced resource store.
type resourceReport struct {
	Resource string            `json:"resource"`
	Endpoint string            `json:"endpoint,omitempty"`
	Findings []s3fence.Finding `json:"findings"`
	Critical int               `json:"critical"`
	Warnings int               `json:"warnings"`
}

// probeTimeout bounds the probe: SeaweedFS's gateway makes a losing
// conditional PUT wait up to a second, and the race check has 40 of them.
const probeTimeout = 2 * time.Minute

// doctorResource audits the store that --resource names.
func (c *cli) doctorResource(ctx context.Context, cmd *command, d *doctorS3, asJSON bool) int {
	target, err := parseS3URL(d.resource, false)
	if err != nil {
		return cmd.exit(err)
	}
	prefix := target.path
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	client, err := c.s3Client(ctx, &d.s3)
	var ue usageError
	if errors.As(err, &ue) {
		return cmd.exit(err)
	}
	if err != nil {
		return c.fail("doctor", exitInternal, err)
	}
	fs, err := s3fence.Probe(ctx, client, target.bucket, prefix, nil)
	if err != nil {
		return c.fail("doctor", exitInternal, err)
	}
	rep := &resourceReport{Resource: "s3://" + target.bucket + "/" + prefix, Endpoint: d.s3.endpoint, Findings: fs}
	for _, f := range fs {
		switch f.Severity {
		case s3fence.SevCritical:
			rep.Critical++
		case s3fence.SevWarn:
			rep.Warnings++
		}
	}
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(c.stdout, "%s\n", b)
	} else {
		fmt.Fprintf(c.stdout, "fencelock doctor: %s", rep.Resource)
		if rep.Endpoint != "" {
			fmt.Fprintf(c.stdout, " (%s)", rep.Endpoint)
		}
		fmt.Fprint(c.stdout, "\n\n")
		for _, f := range fs {
			fmt.Fprintf(c.stdout, "%-9s %-16s %s\n", strings.ToUpper(f.Severity), f.Check, f.Message)
			if f.Fix != "" {
				fmt.Fprintf(c.stdout, "%-9s %-16s fix: %s\n", "", "", f.Fix)
			}
		}
		fmt.Fprintf(c.stdout, "\ncritical: %d, warnings: %d\n", rep.Critical, rep.Warnings)
	}
	if rep.Critical > 0 {
		return exitCritical
	}
	return exitOK
}
