package zktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// installCommand is the command that installs what zktest needs on Debian or
// Ubuntu (about 40 MB; the "zookeeper" package would pull a desktop JRE).
const installCommand = "apt-get update && apt-get install -y --no-install-recommends libzookeeper-java libslf4j-java default-jre-headless"

// ErrNotInstalled is returned (wrapped) by FindInstall, StartServer and
// StartEnsemble when Java or ZooKeeper cannot be found; its message names the
// command that installs them on Debian or Ubuntu.
var ErrNotInstalled = errors.New("zktest: zookeeper not found: install it with `" + installCommand +
	"`, or set ZKTEST_CLASSPATH or ZOOKEEPER_HOME (and JAVA_HOME)")

// Environment variables read by FindInstall.
const (
	// envClasspath is an explicit classpath (os.PathListSeparator separated)
	// holding ZooKeeper, its dependencies and optionally an slf4j backend.
	envClasspath = "ZKTEST_CLASSPATH"
	// envZooKeeperHome is a ZooKeeper binary distribution (its lib/*.jar and
	// zookeeper*.jar are used).
	envZooKeeperHome = "ZOOKEEPER_HOME"
)

// Debian's locations.
const (
	debianZooKeeperJar = "/usr/share/java/zookeeper.jar"
	debianSLF4JSimple  = "/usr/share/java/slf4j-simple.jar"
)

// debianNettyExtras are the Netty jars that NettyServerCnxnFactory (the
// server's TLS transport, see WithTLS) needs and that the Class-Path of
// Debian's zookeeper.jar does not name: without netty-codec every TLS
// connection fails with NoClassDefFoundError ByteToMessageDecoder.
var debianNettyExtras = []string{
	"/usr/share/java/netty-codec.jar",
	"/usr/share/java/netty-resolver.jar",
	"/usr/share/java/netty-transport-native-unix-common.jar",
}

// install is a Java runtime plus the classpath of a ZooKeeper server.
type install struct {
	java      string   // the path of the java executable
	classpath []string // the jars (or directories) to put on the class path
}

// FindInstall checks that zktest can find Java and ZooKeeper, where
// StartServer and StartEnsemble look for them (they call it themselves: a
// caller needs it only to check before it starts anything). It returns nil,
// or an error that wraps ErrNotInstalled and names the command that installs
// what is missing.
//
// ZooKeeper comes from $ZKTEST_CLASSPATH (a list separated by
// os.PathListSeparator), then $ZOOKEEPER_HOME (its lib/*.jar and
// zookeeper*.jar), then Debian's /usr/share/java/zookeeper.jar (whose manifest
// brings its dependencies; slf4j-simple.jar is added when present so the
// server's own messages reach its log). Java comes from $JAVA_HOME/bin/java,
// then PATH. On Debian the Netty jars that zookeeper.jar's manifest misses
// (netty-codec, netty-resolver, netty-transport-native-unix-common) are added
// when present, so that WithTLS servers work.
func FindInstall() error {
	_, err := findInstall()
	return err
}

// findInstall locates ZooKeeper and Java (see FindInstall).
func findInstall() (*install, error) {
	cp, err := findClasspath()
	if err != nil {
		return nil, err
	}
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	return &install{java: java, classpath: cp}, nil
}

func findClasspath() ([]string, error) {
	if v := os.Getenv(envClasspath); v != "" {
		var cp []string
		for _, p := range filepath.SplitList(v) {
			if p != "" {
				cp = append(cp, p)
			}
		}
		for _, p := range cp {
			// "dir/*" is a Java classpath wildcard; check its directory.
			check := strings.TrimSuffix(p, "*")
			if _, err := os.Stat(check); err != nil {
				return nil, fmt.Errorf("%w (%s names %s: %v)", ErrNotInstalled, envClasspath, p, err)
			}
		}
		if len(cp) > 0 {
			return cp, nil
		}
	}
	if home := os.Getenv(envZooKeeperHome); home != "" {
		var cp []string
		for _, pattern := range []string{"zookeeper*.jar", "lib/*.jar"} {
			m, _ := filepath.Glob(filepath.Join(home, pattern))
			sort.Strings(m)
			cp = append(cp, m...)
		}
		if len(cp) == 0 {
			return nil, fmt.Errorf("%w (%s=%s holds no jars)", ErrNotInstalled, envZooKeeperHome, home)
		}
		return cp, nil
	}
	if fileExists(debianZooKeeperJar) {
		cp := []string{debianZooKeeperJar}
		if fileExists(debianSLF4JSimple) {
			cp = append(cp, debianSLF4JSimple)
		}
		for _, j := range debianNettyExtras {
			if fileExists(j) {
				cp = append(cp, j)
			}
		}
		return cp, nil
	}
	return nil, fmt.Errorf("%w (no %s)", ErrNotInstalled, debianZooKeeperJar)
}

func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w (no java in JAVA_HOME or PATH)", ErrNotInstalled)
	}
	return p, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func (in *install) classpathArg() string {
	return strings.Join(in.classpath, string(os.PathListSeparator))
}
