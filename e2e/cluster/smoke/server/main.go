// smoke-web: the smoke test's workload and its in-cluster client, one static binary.
//
//	smoke-web serve [ADDR]  HTTP on ADDR (default :8080): / names the pod, /metrics counts requests
//	smoke-web get URL       print URL's body (DNS and Service check from inside a pod)
//	smoke-web api PATH      GET PATH from the apiserver with the pod's ServiceAccount token
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: smoke-web serve [ADDR] | get URL | api PATH"))
	}
	var err error
	switch os.Args[1] {
	case "serve":
		addr := ":8080"
		if len(os.Args) > 2 {
			addr = os.Args[2]
		}
		err = serve(addr)
	case "get":
		err = get(&http.Client{Timeout: 10 * time.Second}, argOrFail(2), nil)
	case "api":
		err = api(argOrFail(2))
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func argOrFail(i int) string {
	if len(os.Args) <= i {
		fail(fmt.Errorf("missing argument"))
	}
	return os.Args[i]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "smoke-web:", err)
	os.Exit(1)
}

func serve(addr string) error {
	host, _ := os.Hostname()
	var requests atomic.Uint64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP smoke_http_requests_total Requests served on /.\n")
		fmt.Fprintf(w, "# TYPE smoke_http_requests_total counter\n")
		fmt.Fprintf(w, "smoke_http_requests_total %d\n", requests.Load())
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return srv.ListenAndServe()
}

func get(c *http.Client, url string, header http.Header) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	os.Stdout.Write(body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return nil
}

// api reaches the apiserver the way an in-cluster operator does: the kubernetes Service by
// DNS name, the mounted CA, the projected ServiceAccount token.
func api(path string) error {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s/ca.crt", saDir)
	}
	c := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	return get(c, "https://kubernetes.default.svc"+path, http.Header{"Authorization": {"Bearer " + string(token)}})
}
