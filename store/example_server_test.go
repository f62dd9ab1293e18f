package store_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
	"github.com/kvstore/kvstore/store/promstore"
)

// A server embeds the store: one DB for the process, its metrics on
// /metrics (package promstore) and the admin handler under
// /debug/kvstore/ (package admin; "kvstore stat --addr
// http://host:port/debug/kvstore" reads it), next to the server's own API.
func Example_server() {
	dir, _ := os.MkdirTemp("", "kvstore-server-")
	defer os.RemoveAll(dir)
	db, err := store.Open(dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	if _, err := db.Put(context.Background(), examplePacket(1, 2, 3)); err != nil {
		fmt.Println(err)
		return
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(promstore.New(db, nil))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/kvstore/", http.StripPrefix("/debug/kvstore", admin.Handler(db, nil)))
	srv := httptest.NewServer(mux) // in a real server: http.ListenAndServe(addr, mux)
	defer srv.Close()

	for _, path := range []string{"/metrics", "/debug/kvstore/stats"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "kvstore_puts_total") || strings.HasPrefix(line, `  "packets"`) {
				fmt.Println(path, strings.TrimSpace(line))
			}
		}
	}
	// Output:
	// /metrics kvstore_puts_total 1
	// /debug/kvstore/stats "packets": 1,
}
