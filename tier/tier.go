package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Tier is a packet store over one S3 bucket. It is safe for concurrent use
// and holds no state of its own besides its clients: everything it knows is
// in the bucket.
type Tier struct {
	opts    Options
	client  *s3.Client
	clients map[string]*s3.Client // by namespace, from NamespaceCredentials
}

// New returns a Tier for o (defaults filled in). It sends no request: Ping
// checks that the bucket answers.
func New(o Options) (*Tier, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t := &Tier{opts: o, client: newClient(&o, o.Credentials), clients: map[string]*s3.Client{}}
	for ns, c := range o.NamespaceCredentials {
		t.clients[ns] = newClient(&o, c)
	}
	return t, nil
}

// newClient builds an S3 client with the SDK's retries off (the tier's own
// loop retries only what is safe, within its bounds) and checksums only
// where S3 requires them (every part carries a CRC32C in the header).
func newClient(o *Options, c Credentials) *s3.Client {
	so := s3.Options{
		BaseEndpoint:               aws.String(o.Endpoint),
		Region:                     o.Region,
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, c.SessionToken),
		Retryer:                    aws.NopRetryer{},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if o.HTTPClient != nil {
		so.HTTPClient = o.HTTPClient
	}
	return s3.New(so)
}

// clientFor returns the client that signs namespace ns's requests.
func (t *Tier) clientFor(ns string) *s3.Client {
	if c, ok := t.clients[ns]; ok {
		return c
	}
	return t.client
}

// Ping checks that the bucket exists and answers (HeadBucket, retried).
func (t *Tier) Ping(ctx context.Context) error {
	return t.retry(ctx, "head bucket "+t.opts.Bucket, func(ctx context.Context) error {
		_, err := t.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &t.opts.Bucket})
		return err
	})
}

// putIfAbsent creates key with body unless it exists: a conditional PUT
// (If-None-Match: *). It is errExists when the server answers 412 (or 409,
// a concurrent conditional write in progress, which S3 returns and asks
// the caller to retry: the retry then sees 412 or succeeds). Retried,
// since a create that may have succeeded and is sent again meets 412,
// which callers treat as "there", after checking what is there.
func (t *Tier) putIfAbsent(ctx context.Context, ns, key string, body []byte) error {
	return t.retry(ctx, "put "+key, func(ctx context.Context) error {
		_, err := t.clientFor(ns).PutObject(ctx, &s3.PutObjectInput{
			Bucket: &t.opts.Bucket, Key: &key, Body: bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))), IfNoneMatch: aws.String("*"),
		})
		return err
	})
}

// getInto reads object key, which must be exactly len(dst) bytes, into dst.
// check, when not nil, vets the bytes; a failed check or a short or long
// body is retried like a transport error (the next attempt may get good
// bytes), and is ErrCorruption when every attempt fails that way.
func (t *Tier) getInto(ctx context.Context, ns, key string, dst []byte, check func([]byte) error) error {
	return t.retry(ctx, "get "+key, func(ctx context.Context) error {
		out, err := t.clientFor(ns).GetObject(ctx, &s3.GetObjectInput{Bucket: &t.opts.Bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if _, err := io.ReadFull(out.Body, dst); err != nil {
			return bodyError(err, len(dst))
		}
		if n, _ := out.Body.Read(make([]byte, 1)); n > 0 {
			return corrupt(fmt.Errorf("%w: body longer than %d bytes", ErrCorruption, len(dst)))
		}
		if check != nil {
			if err := check(dst); err != nil {
				return corrupt(err)
			}
		}
		return nil
	})
}

// getSmall reads object key whole, refusing more than limit bytes, and
// vets it with check (retried as in getInto).
func (t *Tier) getSmall(ctx context.Context, ns, key string, limit int64, check func([]byte) error) ([]byte, error) {
	var b []byte
	err := t.retry(ctx, "get "+key, func(ctx context.Context) error {
		out, err := t.clientFor(ns).GetObject(ctx, &s3.GetObjectInput{Bucket: &t.opts.Bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if out.ContentLength != nil && *out.ContentLength > limit {
			return fmt.Errorf("%w: %d bytes exceed the limit of %d", ErrCorruption, *out.ContentLength, limit)
		}
		b, err = io.ReadAll(io.LimitReader(out.Body, limit+1))
		switch {
		case err != nil:
			return bodyError(err, -1)
		case int64(len(b)) > limit:
			return fmt.Errorf("%w: more than %d bytes", ErrCorruption, limit)
		case out.ContentLength != nil && int64(len(b)) != *out.ContentLength:
			return corrupt(fmt.Errorf("%w: body of %d bytes, Content-Length %d", ErrCorruption, len(b), *out.ContentLength))
		}
		if err := check(b); err != nil {
			return corrupt(err)
		}
		return nil
	})
	return b, err
}

// bodyError classifies a failed body read of want bytes (-1: unknown): a body that ended early is
// bad bytes (a truncating server or proxy); anything else (a timeout, a
// reset) is the transport's and stays ErrUnavailable.
func bodyError(err error, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if want < 0 {
			return corrupt(fmt.Errorf("%w: body ended early: %v", ErrCorruption, err))
		}
		return corrupt(fmt.Errorf("%w: body shorter than %d bytes: %v", ErrCorruption, want, err))
	}
	return err
}

// corruptErr marks bad bytes received: worth another attempt, and
// ErrCorruption (not ErrUnavailable) if they are what the last one got.
type corruptErr struct{ err error }

func (e corruptErr) Error() string { return e.err.Error() }
func (e corruptErr) Unwrap() error { return e.err }

func corrupt(err error) error { return corruptErr{err} }

// retry runs op up to Options.Attempts times, each under RequestTimeout,
// with exponential backoff between them, for as long as the failure is
// transient (see classify). The error names what and wraps a sentinel.
func (t *Tier) retry(ctx context.Context, what string, op func(context.Context) error) error {
	wait := t.opts.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		err = t.attempt(ctx, op)
		again, wrapped := classify(err)
		if !again || attempt >= t.opts.Attempts || ctx.Err() != nil {
			if wrapped == nil {
				return nil
			}
			return fmt.Errorf("tier: %s (attempt %d of %d): %w", what, attempt, t.opts.Attempts, wrapped)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%w: tier: %s: %w", ErrUnavailable, what, ctx.Err())
		}
		wait *= 2
	}
}

func (t *Tier) attempt(ctx context.Context, op func(context.Context) error) error {
	if t.opts.RequestTimeout <= 0 {
		return op(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.RequestTimeout)
	defer cancel()
	return op(ctx)
}

// classify says whether err is worth another attempt, and wraps it in the
// sentinel a caller sees: a missing key (NoSuchKey, or a bare 404 of a
// HEAD) ErrNotFound, 412 errExists (neither retried); bad bytes ErrCorruption and 5xx, 429, 409 conditional
// conflicts, timeouts and transport errors ErrUnavailable (retried); other
// 4xx (denied, bad request) ErrUnavailable, not retried.
func classify(err error) (again bool, wrapped error) {
	if err == nil {
		return false, nil
	}
	var c corruptErr
	if errors.As(err, &c) {
		return true, c.err
	}
	if errors.Is(err, ErrCorruption) || errors.Is(err, ErrInvalidArgument) {
		return false, err
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var api smithy.APIError
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	switch {
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound && code == "":
		// Only a missing key is "not found": servers answer 404 for other
		// things too (versitygw: XAdminUserNotFound for an unknown access
		// key, NoSuchBucket), which are the tier failing.
		return false, fmt.Errorf("%w: %w", ErrNotFound, err)
	case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
		return false, fmt.Errorf("%w: %w", errExists, err)
	case status == http.StatusConflict && strings.Contains(code, "Conditional"):
		return true, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout:
		return true, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case status != 0:
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// No HTTP answer: refused, reset, timed out, or the body broke off.
	return true, fmt.Errorf("%w: %w", ErrUnavailable, err)
}
