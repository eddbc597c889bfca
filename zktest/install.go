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

// InstallCommand is the command that installs what zktest needs on Debian or
// Ubuntu (about 40 MB; the "zookeeper" package would pull a desktop JRE).
const InstallCommand = "apt-get update && apt-get install -y --no-install-recommends libzookeeper-java libslf4j-java default-jre-headless"

// ErrNotInstalled is returned (wrapped) by FindInstall when Java or ZooKeeper
// cannot be found.
var ErrNotInstalled = errors.New("zktest: zookeeper not found: install it with `" + InstallCommand +
	"`, or set ZKTEST_CLASSPATH or ZOOKEEPER_HOME (and JAVA_HOME)")

// Environment variables read by FindInstall.
const (
	// EnvClasspath is an explicit classpath (os.PathListSeparator separated)
	// holding ZooKeeper, its dependencies and optionally an slf4j backend.
	EnvClasspath = "ZKTEST_CLASSPATH"
	// EnvZooKeeperHome is a ZooKeeper binary distribution (its lib/*.jar and
	// zookeeper*.jar are used).
	EnvZooKeeperHome = "ZOOKEEPER_HOME"
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

// Install is a Java runtime plus the classpath of a ZooKeeper server.
type Install struct {
	// Java is the path of the java executable.
	Java string
	// Classpath lists the jars (or directories) to put on the class path.
	Classpath []string
}

// FindInstall locates ZooKeeper and Java.
//
// ZooKeeper comes from $ZKTEST_CLASSPATH (a list separated by
// os.PathListSeparator), then $ZOOKEEPER_HOME (its lib/*.jar and
// zookeeper*.jar), then Debian's /usr/share/java/zookeeper.jar (whose manifest
// brings its dependencies; slf4j-simple.jar is added when present so the
// server's own messages reach its log). Java comes from $JAVA_HOME/bin/java,
// then PATH. On Debian the Netty jars that zookeeper.jar's manifest misses
// (netty-codec, netty-resolver, netty-transport-native-unix-common) are added
// when present, so that WithTLS servers work. The error wraps ErrNotInstalled
// and names InstallCommand.
func FindInstall() (*Install, error) {
	cp, err := findClasspath()
	if err != nil {
		return nil, err
	}
	java, err := findJava()
	if err != nil {
		return nil, err
	}
	return &Install{Java: java, Classpath: cp}, nil
}

func findClasspath() ([]string, error) {
	if v := os.Getenv(EnvClasspath); v != "" {
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
				return nil, fmt.Errorf("%w (%s names %s: %v)", ErrNotInstalled, EnvClasspath, p, err)
			}
		}
		if len(cp) > 0 {
			return cp, nil
		}
	}
	if home := os.Getenv(EnvZooKeeperHome); home != "" {
		var cp []string
		for _, pattern := range []string{"zookeeper*.jar", "lib/*.jar"} {
			m, _ := filepath.Glob(filepath.Join(home, pattern))
			sort.Strings(m)
			cp = append(cp, m...)
		}
		if len(cp) == 0 {
			return nil, fmt.Errorf("%w (%s=%s holds no jars)", ErrNotInstalled, EnvZooKeeperHome, home)
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

func (in *Install) classpath() string {
	return strings.Join(in.Classpath, string(os.PathListSeparator))
}
