package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3Help is what -h of the commands that reach S3 say of it.
const s3Help = `S3: credentials, region and endpoint come as for the AWS CLI: the
variables AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, then
~/.aws/config and ~/.aws/credentials (SSO, roles and instance
credentials too). --endpoint reaches an S3-compatible store, with
path-style addressing (http://HOST/BUCKET/KEY) unless --path-style=false.`

// s3Flags are the flags of the commands that reach S3.
type s3Flags struct {
	endpoint  string
	region    string
	pathStyle string // "", "true" or "false"
	timeout   time.Duration
}

// add registers the flags on cmd; --timeout only with timeout (doctor
// has its own).
func (f *s3Flags) add(cmd *command, timeout bool) {
	cmd.fs.StringVar(&f.endpoint, "endpoint", "", "the S3 endpoint `URL` of an S3-compatible store (default: AWS's, or AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)")
	cmd.fromEnv("endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	cmd.fs.StringVar(&f.region, "region", "", "the AWS `region` (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)")
	cmd.fromEnv("region", "AWS_REGION", "AWS_DEFAULT_REGION")
	cmd.fs.Func("path-style", "path-style addressing, true or false (default: true with --endpoint, else false)", func(s string) error {
		switch s {
		case "true", "false":
			f.pathStyle = s
			return nil
		}
		return fmt.Errorf("want true or false")
	})
	if timeout {
		cmd.duration(&f.timeout, "timeout", 30*time.Second, "how long to wait for the store")
		cmd.fromEnv("timeout", "FENCELOCK_TIMEOUT")
	}
}

// s3Target is a parsed s3://BUCKET/PATH URL.
type s3Target struct {
	bucket, path string
}

// parseS3URL parses s3://BUCKET[/PATH]; what of the URL's path follows
// the bucket is PATH, as written (no %-decoding: keys are taken as they
// are). needPath requires a PATH.
func parseS3URL(raw string, needPath bool) (s3Target, error) {
	rest, ok := strings.CutPrefix(raw, "s3://")
	if !ok {
		return s3Target{}, usageErrorf("%q: want an s3://BUCKET/KEY URL", raw)
	}
	bucket, path, _ := strings.Cut(rest, "/")
	switch {
	case bucket == "":
		return s3Target{}, usageErrorf("%q: no bucket", raw)
	case strings.ContainsAny(bucket, "?#@:") || strings.ToLower(bucket) != bucket:
		return s3Target{}, usageErrorf("%q: %q is not a bucket name", raw, bucket)
	case needPath && path == "":
		return s3Target{}, usageErrorf("%q: no key after the bucket", raw)
	}
	return s3Target{bucket: bucket, path: path}, nil
}

// s3Client returns an S3 client configured as the AWS CLI would be, with
// what the flags say on top. Variables are read through c.getenv where
// the flags and static credentials are concerned; the SDK reads the
// rest (profiles, files) itself.
func (c *cli) s3Client(ctx context.Context, f *s3Flags) (*s3.Client, error) {
	var opts []func(*config.LoadOptions) error
	if id, secret := c.getenv("AWS_ACCESS_KEY_ID"), c.getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, c.getenv("AWS_SESSION_TOKEN"))))
	}
	if p := c.getenv("AWS_PROFILE"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if f.region != "" {
		opts = append(opts, config.WithRegion(f.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if f.endpoint != "" {
		u, err := url.Parse(f.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--endpoint %q: want an http:// or https:// URL", f.endpoint)
		}
	}
	pathStyle := f.pathStyle == "true" || (f.pathStyle == "" && f.endpoint != "")
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if f.endpoint != "" {
			o.BaseEndpoint = aws.String(f.endpoint)
		}
		o.UsePathStyle = pathStyle
	}), nil
}
