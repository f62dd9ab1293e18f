package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/spf13/pflag"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/tier"
)

func init() {
	register(&command{name: "tier", summary: "the shared object-store tier (status | ls | push | pull | verify)", long: tierSummary,
		sub: []*command{
			{name: "status", summary: "check that the tier answers", long: tierSummary, setup: tierVerb(runTierStatus)},
			{name: "ls", summary: "packets the tier holds for --ns and --model", long: tierSummary, setup: tierVerb(runTierLs)},
			{name: "push", args: "[ID...]", summary: "copy the local store's packets (all, or the ids given) to the tier", long: tierSummary, setup: tierVerb(runTierPush)},
			{name: "pull", args: "ID...", summary: "fetch packets of --ns and --model from the tier into the local store, verified", long: tierSummary, setup: tierVerb(runTierPull)},
			{name: "verify", summary: "fetch every packet the tier holds for --ns and --model and check every CRC, keeping nothing", long: tierSummary, setup: tierVerb(runTierVerify)},
		}})
}

const tierSummary = `The shared tier (package tier): packets as objects of an S3-compatible
store under <prefix>/<namespace hash>/<model fingerprint>/<packet id>/, each
written once (a conditional create) and every part's CRC32C checked on
fetch.

  status  check that the tier answers (the bucket exists, the keys work)
  ls      packet ids the tier holds for --ns and --model (a full fingerprint)
  push    copy local packets to the tier (all, or the ids given; --ns picks)
  pull    fetch packets of --ns and --model into the local store (--dir);
          an id may be a unique prefix (4 hex digits or more) of one the
          tier holds for them
  verify  fetch every packet of --ns and --model and check it; exit 1 on any bad one

Environment (the credentials only from there, never from flags, which
other users can read):

  KVSTORE_TIER_ACCESS_KEY   the S3 access key id (required)
  KVSTORE_TIER_SECRET_KEY   its secret key (required)
  KVSTORE_TIER_ENDPOINT     default of --endpoint, e.g. http://127.0.0.1:7070
  KVSTORE_TIER_BUCKET       default of --bucket
  KVSTORE_TIER_PREFIX       default of --prefix

docs/cli.md ("The shared tier") shows how to run an S3 server for it.`

// tierFlags are the flags every tier verb shares.
type tierFlags struct {
	endpoint, bucket, prefix, ns, model string
	limit                               int
}

func tierVerb(run func(context.Context, *env, *tierFlags, []string) error) func(*pflag.FlagSet, *env) verbFunc {
	return func(fs *pflag.FlagSet, e *env) verbFunc {
		f := &tierFlags{}
		fs.StringVar(&f.endpoint, "endpoint", os.Getenv("KVSTORE_TIER_ENDPOINT"), "the S3 server's base URL (default $KVSTORE_TIER_ENDPOINT; credentials from $KVSTORE_TIER_ACCESS_KEY and $KVSTORE_TIER_SECRET_KEY)")
		fs.StringVar(&f.bucket, "bucket", os.Getenv("KVSTORE_TIER_BUCKET"), "the bucket (default $KVSTORE_TIER_BUCKET)")
		fs.StringVar(&f.prefix, "prefix", os.Getenv("KVSTORE_TIER_PREFIX"), "key prefix (default $KVSTORE_TIER_PREFIX)")
		fs.StringVar(&f.ns, "ns", "", "namespace")
		fs.StringVar(&f.model, "model", "", "model fingerprint, 64 hex digits (ls, pull, verify)")
		fs.IntVar(&f.limit, "limit", 0, "most packets listed or verified (0: all)")
		return func(ctx context.Context, e *env, args []string) error { return run(ctx, e, f, args) }
	}
}

// Environment variables of the tier's credentials.
const (
	envAccessKey = "KVSTORE_TIER_ACCESS_KEY"
	envSecretKey = "KVSTORE_TIER_SECRET_KEY"
)

func (f *tierFlags) open() (*tier.Tier, error) {
	if f.endpoint == "" || f.bucket == "" {
		return nil, fmt.Errorf("%w: --endpoint and --bucket (or KVSTORE_TIER_ENDPOINT, KVSTORE_TIER_BUCKET) are required", errUsage)
	}
	var missing []string
	for _, v := range []string{envAccessKey, envSecretKey} {
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: the tier's credentials come from the environment: set %s (the S3 access key pair; never a flag)",
			errUsage, strings.Join(missing, " and "))
	}
	return tier.New(tier.Options{Endpoint: f.endpoint, Bucket: f.bucket, Prefix: f.prefix,
		Credentials: tier.Credentials{AccessKey: os.Getenv(envAccessKey), SecretKey: os.Getenv(envSecretKey)}})
}

// explain rewrites the error of a tier call when it carries the S3 SDK's
// transport or HTTP failure, which reads "https response error" even for
// an http endpoint and names no setting, into what a user can act on: the
// endpoint that cannot be reached, the credentials refused (by their
// environment variables), the bucket that does not exist (bucket: the
// call was on the bucket itself), or the HTTP status and S3 error code.
// The sentinel is kept; other errors (corruption found by the tier, a
// missing packet) are returned as they are.
func (f *tierFlags) explain(err error, bucket bool) error {
	if err == nil {
		return nil
	}
	var re *awshttp.ResponseError
	var ue *url.Error
	hasRE, hasUE := errors.As(err, &re), errors.As(err, &ue)
	if !hasRE && !hasUE {
		return err
	}
	status, code, msg, op := 0, "", "", "request"
	if hasRE {
		status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code, msg = api.ErrorCode(), api.ErrorMessage()
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		op = oe.OperationName
	}
	sentinel := tier.ErrUnavailable
	if errors.Is(err, tier.ErrNotFound) {
		sentinel = tier.ErrNotFound
	}
	where := fmt.Sprintf("the tier at %s", f.endpoint)
	switch {
	case status == 0 && hasUE:
		return fmt.Errorf("%w: cannot reach %s: %v", tier.ErrUnavailable, where, ue.Err)
	case status == 0:
		return err
	case status == http.StatusForbidden || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
		code == "AccessDenied" || strings.HasSuffix(code, "UserNotFound"):
		return fmt.Errorf("%w: %s refused the credentials (access key %q from %s, secret from %s): %s: HTTP %d %s",
			tier.ErrUnavailable, where, os.Getenv(envAccessKey), envAccessKey, envSecretKey, op, status, code)
	case code == "NoSuchBucket":
		return fmt.Errorf("%w: %s has no bucket %q (create it, or give another --bucket)", tier.ErrUnavailable, where, f.bucket)
	case bucket && status == http.StatusNotFound:
		// A HEAD's 404 has no body to tell why; versitygw answers it for
		// an unknown access key too.
		return fmt.Errorf("%w: %s has no bucket %q (create it, or give another --bucket), or does not know the access key %q from %s",
			tier.ErrUnavailable, where, f.bucket, os.Getenv(envAccessKey), envAccessKey)
	case sentinel == tier.ErrNotFound:
		return fmt.Errorf("%w: %s holds no such object (%s: HTTP %d %s)", sentinel, where, op, status, code)
	}
	detail := fmt.Sprintf("HTTP %d", status)
	if code != "" {
		detail += " " + code
	}
	if msg != "" {
		detail += ": " + msg
	}
	return fmt.Errorf("%w: %s answered %s with %s", sentinel, where, op, detail)
}

func (f *tierFlags) fingerprint() (format.Fingerprint, error) {
	var fp format.Fingerprint
	b, err := hex.DecodeString(f.model)
	if err != nil || len(b) != len(fp) {
		return fp, fmt.Errorf("%w: --model %q: want a model fingerprint of %d hex digits (kvstore inspect shows it)", errUsage, f.model, 2*len(fp))
	}
	copy(fp[:], b)
	return fp, nil
}

type tierStatusOutput struct {
	Endpoint string `json:"endpoint"`
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix"`
	OK       bool   `json:"ok"`
}

func runTierStatus(ctx context.Context, e *env, f *tierFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	t, err := f.open()
	if err != nil {
		return err
	}
	if err := t.Ping(ctx); err != nil {
		return f.explain(err, true)
	}
	out := tierStatusOutput{Endpoint: f.endpoint, Bucket: f.bucket, Prefix: f.prefix, OK: true}
	return output(e, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "tier %s bucket %q prefix %q: ok\n", f.endpoint, f.bucket, f.prefix)
		return err
	})
}

// tierList is the ids of --ns and --model in the tier.
func (f *tierFlags) list(ctx context.Context) (*tier.Tier, format.Fingerprint, []format.PacketID, error) {
	fp, err := f.fingerprint()
	if err != nil {
		return nil, fp, nil, err
	}
	t, err := f.open()
	if err != nil {
		return nil, fp, nil, err
	}
	ids, err := t.List(ctx, f.ns, fp, f.limit)
	return t, fp, ids, f.explain(err, false)
}

func runTierLs(ctx context.Context, e *env, f *tierFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	_, _, ids, err := f.list(ctx)
	if err != nil {
		return err
	}
	out := struct {
		Packets []string `json:"packets"`
	}{Packets: []string{}}
	for _, id := range ids {
		out.Packets = append(out.Packets, id.String())
	}
	return output(e, out, func(w io.Writer) error {
		for _, id := range out.Packets {
			fmt.Fprintln(w, id)
		}
		_, err := fmt.Fprintf(w, "%d packets\n", len(out.Packets))
		return err
	})
}

type tierPushOutput struct {
	Created []string `json:"created"`
	Present []string `json:"present"`
}

func runTierPush(ctx context.Context, e *env, f *tierFlags, args []string) error {
	t, err := f.open()
	if err != nil {
		return err
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	var hs []*format.PacketHeader
	if len(args) == 0 {
		err = db.Headers(func(h *format.PacketHeader) error {
			if f.ns == "" || h.Namespace == f.ns {
				hs = append(hs, h)
			}
			return nil
		})
	} else {
		for _, a := range args {
			h, ferr := findPacket(db, a, f.ns)
			if ferr != nil {
				return ferr
			}
			hs = append(hs, h)
		}
	}
	if err != nil {
		return err
	}
	out := tierPushOutput{Created: []string{}, Present: []string{}}
	p := newProgress(e, "tier push")
	for i, h := range hs {
		p.update(int64(i), int64(len(hs)), false)
		r, err := t.PushStored(ctx, db, h.Namespace, h.Model, h.ID)
		if err != nil {
			p.done()
			return fmt.Errorf("push packet %s: %w", h.ID.Short(), f.explain(err, false))
		}
		if r == tier.Created {
			out.Created = append(out.Created, h.ID.String())
		} else {
			out.Present = append(out.Present, h.ID.String())
		}
	}
	p.done()
	return output(e, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "pushed %d packets, %d already in the tier\n", len(out.Created), len(out.Present))
		return err
	})
}

func runTierPull(ctx context.Context, e *env, f *tierFlags, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: give the packet ids to pull", errUsage)
	}
	fp, err := f.fingerprint()
	if err != nil {
		return err
	}
	if err := checkIDs(args...); err != nil {
		return err
	}
	t, err := f.open()
	if err != nil {
		return err
	}
	ids, err := f.resolve(ctx, t, fp, args)
	if err != nil {
		return err
	}
	db, err := openStore(e, true)
	if err != nil {
		return err
	}
	defer db.Close()
	c := &tier.Cache{DB: db, Tier: t}
	p := newProgress(e, "tier pull")
	for i, id := range ids {
		p.update(int64(i), int64(len(ids)), false)
		if err := c.Ensure(ctx, f.ns, fp, id); err != nil {
			p.done()
			return fmt.Errorf("pull packet %s: %w", id.Short(), f.explain(err, false))
		}
	}
	p.done()
	out := struct {
		Pulled int `json:"pulled"`
	}{len(ids)}
	return output(e, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%d packets in the local store, every chunk verified\n", len(ids))
		return err
	})
}

// resolve turns pull's arguments into packet ids: a whole id (64 hex
// digits) as it is, a shorter one by the one id of --ns and --model in the
// tier that starts with it (the tier is listed once, when needed). No
// match is ErrNotFound, several a usage error.
func (f *tierFlags) resolve(ctx context.Context, t *tier.Tier, fp format.Fingerprint, args []string) ([]format.PacketID, error) {
	ids := make([]format.PacketID, len(args))
	var held []format.PacketID
	listed := false
	for i, a := range args {
		if id, err := format.ParsePacketID(a); err == nil {
			ids[i] = id
			continue
		}
		if !listed {
			var err error
			if held, err = t.List(ctx, f.ns, fp, 0); err != nil {
				return nil, fmt.Errorf("list the tier to resolve %s: %w", a, f.explain(err, false))
			}
			listed = true
		}
		var found []format.PacketID
		for _, id := range held {
			if strings.HasPrefix(id.String(), strings.ToLower(a)) {
				found = append(found, id)
			}
		}
		switch len(found) {
		case 0:
			return nil, fmt.Errorf("%w: the tier holds no packet %s for namespace %q and model %s", tier.ErrNotFound, a, f.ns, fp.Short())
		case 1:
			ids[i] = found[0]
		default:
			return nil, fmt.Errorf("%w: packet id %s is ambiguous: %d packets in the tier match (give more digits)", errUsage, a, len(found))
		}
	}
	return ids, nil
}

type tierVerifyOutput struct {
	Checked int               `json:"checked"`
	Bad     map[string]string `json:"bad"`
}

func runTierVerify(ctx context.Context, e *env, f *tierFlags, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	t, fp, ids, err := f.list(ctx)
	if err != nil {
		return err
	}
	out := tierVerifyOutput{Bad: map[string]string{}}
	p := newProgress(e, "tier verify")
	for i, id := range ids {
		p.update(int64(i), int64(len(ids)), false)
		if _, err := t.Fetch(ctx, f.ns, fp, id); err != nil {
			if ctx.Err() != nil {
				p.done()
				return err
			}
			out.Bad[id.String()] = f.explain(err, false).Error()
		}
		out.Checked++
	}
	p.done()
	if err := output(e, out, func(w io.Writer) error {
		for id, why := range out.Bad {
			fmt.Fprintf(w, "bad %s: %s\n", id, why)
		}
		_, err := fmt.Fprintf(w, "checked %d packets, %d bad\n", out.Checked, len(out.Bad))
		return err
	}); err != nil {
		return err
	}
	if len(out.Bad) > 0 {
		return fmt.Errorf("%w: %d of %d packets in the tier failed their checks", store.ErrCorruption, len(out.Bad), out.Checked)
	}
	return nil
}
