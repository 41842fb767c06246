package download

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestZZTLS(t *testing.T) {
	chunk := make([]byte, 1<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(64<<20))
		for range 64 {
			w.Write(chunk)
		}
	}))
	defer srv.Close()
	shared := sharedMaps(t)
	s, _ := Open(shared)
	defer s.Close()
	s.Start()
	runClient(t, shared, "mem:"+srv.URL+"/x")
	conns, _, err := s.collect()
	for _, c := range conns {
		t.Logf("%+v mean %d", c, c.Bytes/c.Receives)
	}
	t.Log(err)
}
