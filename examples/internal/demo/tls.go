package demo

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// TLSFiles are the -tls-* flags of MainTLS: PEM files and a server name.
type TLSFiles struct {
	// CA is the CA certificate(s) that signed the servers' certificates
	// (-tls-ca); empty means the system's roots.
	CA string
	// Cert and Key are the client's certificate and private key (-tls-cert,
	// -tls-key), which ZooKeeper requires by default (ssl.clientAuth=need).
	Cert, Key string
	// ServerName is the name every server's certificate must carry
	// (-tls-server-name); empty means any of the -zk hosts.
	ServerName string
}

// Set reports whether any -tls-* flag was given.
func (f TLSFiles) Set() bool { return f.CA != "" || f.Cert != "" || f.Key != "" || f.ServerName != "" }

// TLSConfig builds the client configuration of the -tls-* flags for the
// servers (host:port) given with -zk.
//
// The examples reach the servers through their own fault proxies on
// 127.0.0.1, so the address a session dials does not tell which server
// answers, and session.WithTLS cannot take the name to verify from it. So
// with -tls-server-name every server's certificate must carry that name;
// without it, the certificate must be valid (signed by the CA) and name one
// of the -zk hosts. Either way the chain is verified against -tls-ca.
func TLSConfig(f TLSFiles, servers []string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", f.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if f.ServerName != "" {
		cfg.ServerName = f.ServerName
		return cfg, nil
	}
	var hosts []string
	for _, s := range servers {
		h, _, err := net.SplitHostPort(s)
		if err != nil {
			h = s
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, errors.New("the -tls-* flags need -zk")
	}
	// The default verification (the chain, then the name) is done here,
	// against any of the hosts, instead of by crypto/tls against one name.
	roots := cfg.RootCAs
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		leaf := cs.PeerCertificates[0]
		if _, err := leaf.Verify(opts); err != nil {
			return err
		}
		for _, h := range hosts {
			if leaf.VerifyHostname(h) == nil {
				return nil
			}
		}
		return fmt.Errorf("the server's certificate names none of the -zk hosts (%s): give -tls-server-name",
			strings.Join(hosts, ", "))
	}
	return cfg, nil
}
