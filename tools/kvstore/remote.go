package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kvstore/kvstore/store"
)

// remote reports whether the verb asks a live store's admin handler
// (--addr) instead of opening --dir; giving both is a usage error.
func remote(e *env) (bool, error) {
	switch {
	case e.addr == "":
		return false, nil
	case e.dir != "":
		return false, fmt.Errorf("%w: give --dir or --addr, not both", errUsage)
	}
	u, err := url.Parse(e.addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false, fmt.Errorf("%w: --addr %q: want http://host:port[/prefix]", errUsage, e.addr)
	}
	return true, nil
}

// fetch GETs path (with query q) from the admin handler at --addr and
// decodes its JSON into v. The handler's {"error": ...} answers come back
// as errors wrapping the sentinel their status stands for (404:
// ErrNotFound, 400: bad usage).
func fetch(ctx context.Context, e *env, path string, q url.Values, v any) error {
	u := strings.TrimSuffix(e.addr, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: --addr: %v", errUsage, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin handler at %s: %w", e.addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("admin handler at %s: read %s: %w", e.addr, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Error == "" {
			return fmt.Errorf("admin handler at %s: %s: %s (not a kvstore admin handler?)", e.addr, path, resp.Status)
		}
		switch resp.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %s", store.ErrNotFound, msg.Error)
		case http.StatusBadRequest:
			return fmt.Errorf("%w: %s", errUsage, msg.Error)
		}
		return fmt.Errorf("admin handler at %s: %s: %s", e.addr, path, msg.Error)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("admin handler at %s: %s: %w (not a kvstore admin handler?)", e.addr, path, err)
	}
	return nil
}

// report is what a read-only verb prints: fetched from the admin handler's
// path (with query q) when --addr is given, else made by local from the
// store in --dir, opened read-only and closed before report returns. Both
// ways give the same admin type, so the verb prints it one way.
func report[T any](ctx context.Context, e *env, path string, q url.Values, local func(*store.DB) (*T, error)) (*T, error) {
	if r, err := remote(e); err != nil {
		return nil, err
	} else if r {
		out := new(T)
		if err := fetch(ctx, e, path, q, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	db, err := openStore(e, false)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return local(db)
}
