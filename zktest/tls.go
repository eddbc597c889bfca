package zktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLS is a throwaway public-key infrastructure for tests: a certificate
// authority, a server certificate for 127.0.0.1, ::1 and localhost, and a
// client certificate, all ECDSA P-256 keys signed by the CA and valid for a
// day. NewTLS makes one; WithTLS makes one per server or ensemble and gives
// it to the servers. The fields are PEM blocks, as a program's -tls-* files
// would hold them; treat them as read-only.
type TLS struct {
	// CACertPEM is the CA's certificate: what clients and servers trust.
	CACertPEM []byte
	// ServerCertPEM is the servers' certificate (its key stays with the
	// servers).
	ServerCertPEM []byte
	// ClientCertPEM and ClientKeyPEM (PKCS #8) are a client certificate and
	// its key, which the servers accept (they require one, as ZooKeeper does
	// by default).
	ClientCertPEM, ClientKeyPEM []byte

	serverKeyPEM []byte // PKCS #8
}

// tlsValidity is how long the generated certificates are valid (from an hour
// ago, against clock skew between the JVM and the test).
const tlsValidity = 24 * time.Hour

// NewTLS generates a new CA and a server and a client certificate signed by
// it. Two calls give unrelated CAs: a client configured from one fails to
// verify servers started with the other, the wrong-CA case.
func NewTLS() (*TLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("zktest: tls: %w", err)
	}
	now := time.Now()
	caSerial := serial()
	caTmpl := &x509.Certificate{
		SerialNumber: caSerial,
		// A name of its own: a verifier that holds another zktest CA then
		// reports an unknown authority, not a failed signature check.
		Subject:               pkix.Name{CommonName: fmt.Sprintf("zktest CA %x", caSerial.Uint64()), Organization: []string{"zktest"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(tlsValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("zktest: tls: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("zktest: tls: CA certificate: %w", err)
	}
	issue := func(cn string, usage x509.ExtKeyUsage, server bool) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"zktest"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(tlsValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		pk, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", pk), nil
	}
	t := &TLS{CACertPEM: pemBlock("CERTIFICATE", caDER)}
	if t.ServerCertPEM, t.serverKeyPEM, err = issue("zktest server", x509.ExtKeyUsageServerAuth, true); err != nil {
		return nil, fmt.Errorf("zktest: tls: server certificate: %w", err)
	}
	if t.ClientCertPEM, t.ClientKeyPEM, err = issue("zktest client", x509.ExtKeyUsageClientAuth, false); err != nil {
		return nil, fmt.Errorf("zktest: tls: client certificate: %w", err)
	}
	return t, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil || n.Sign() == 0 {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// caPool returns a new pool holding the CA's certificate.
func (t *TLS) caPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(t.CACertPEM)
	return p
}

// ClientConfig returns a new client configuration that trusts the CA and
// presents the client certificate (TLS 1.2 or newer). ServerName is left
// empty: session.WithTLS fills it in from each server's address (the server
// certificate names 127.0.0.1, ::1 and localhost).
func (t *TLS) ClientConfig() *tls.Config {
	cfg := &tls.Config{RootCAs: t.caPool(), MinVersion: tls.VersionTLS12}
	if cert, err := tls.X509KeyPair(t.ClientCertPEM, t.ClientKeyPEM); err == nil {
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// Files of the PEM key and trust stores in a server's directory.
const (
	keyStoreFile   = "keystore.pem"
	trustStoreFile = "truststore.pem"
)

// writeStores writes the server's key store (its key, its certificate and
// the CA's) and trust store (the CA's certificate) into dir, in the PEM form
// that ZooKeeper 3.8 reads with ssl.keyStore.type=PEM.
func (t *TLS) writeStores(dir string) error {
	var ks []byte
	ks = append(ks, t.serverKeyPEM...)
	ks = append(ks, t.ServerCertPEM...)
	ks = append(ks, t.CACertPEM...)
	if err := os.WriteFile(filepath.Join(dir, keyStoreFile), ks, 0o600); err != nil {
		return fmt.Errorf("zktest: tls: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, trustStoreFile), t.CACertPEM, 0o644); err != nil {
		return fmt.Errorf("zktest: tls: %w", err)
	}
	return nil
}
