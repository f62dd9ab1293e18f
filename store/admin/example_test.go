package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
)

// A server mounts the admin handler under a prefix of its own mux, next to
// its API; "kvstore stat --addr http://host:port/debug/kvstore" then reads
// the live store.
func ExampleHandler() {
	dir, _ := os.MkdirTemp("", "kvstore-admin-")
	defer os.RemoveAll(dir)
	db, err := store.Open(dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	spec := &format.ModelSpec{Architecture: "llama", Layers: 1, KVHeads: 1, HeadDim: 2, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	if _, err := db.Put(context.Background(), &store.Packet{
		PacketDesc: format.PacketDesc{Namespace: "docs", Model: spec, TokenIDs: []uint32{1, 2}},
		Layers:     []store.Layer{{K: make([]byte, 16), V: make([]byte, 16)}},
	}); err != nil {
		fmt.Println(err)
		return
	}

	mux := http.NewServeMux()
	mux.Handle("/debug/kvstore/", http.StripPrefix("/debug/kvstore", admin.Handler(db, nil)))
	srv := httptest.NewServer(mux) // a real server: http.ListenAndServe("localhost:8080", mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/debug/kvstore/stats")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var st admin.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, st.Packets, "packet in namespace", st.Groups[0].Namespace)
	// Output: 200 OK 1 packet in namespace docs
}
