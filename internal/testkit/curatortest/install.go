package curatortest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// InstallCommand installs everything the interoperability tests need on Debian
// or Ubuntu: ZooKeeper (zktest's server), Apache Curator 5.4 with its
// dependencies, a Java runtime and javac. It matches the Makefile's APT_PKGS.
const InstallCommand = "apt-get update && apt-get install -y --no-install-recommends libzookeeper-java libslf4j-java default-jre-headless libcurator-recipes-java libcurator-discovery-java default-jdk-headless"

// EnvClasspath names the environment variable that overrides where the Curator
// jars come from: a list separated by os.PathListSeparator holding Curator
// (client, framework, recipes), ZooKeeper (with jute), Guava, slf4j-api and
// optionally an slf4j backend.
const EnvClasspath = "CURATORTEST_CLASSPATH"

// ErrNotInstalled is returned (wrapped, with what is missing) by FindInstall
// when java, javac or the Curator jars cannot be found.
var ErrNotInstalled = errors.New("curatortest: apache curator 5.4 or a jdk not found: install it with `" +
	InstallCommand + "`, or set " + EnvClasspath + " (and JAVA_HOME)")

// debianDir is where Debian's Java library packages put their jars.
const debianDir = "/usr/share/java"

// debianRequired lists the jars taken from debianDir, each named after the
// Debian package that ships it. The Curator jars' manifests point at the same
// files; listing them explicitly makes a missing one an error here rather than
// a NoClassDefFoundError in the JVM.
var debianRequired = []struct{ jar, pkg string }{
	{"curator-recipes.jar", "libcurator-recipes-java"},
	{"curator-framework.jar", "libcurator-framework-java"},
	{"curator-client.jar", "libcurator-client-java"},
	{"curator-x-discovery.jar", "libcurator-discovery-java"},
	{"jackson-databind.jar", "libjackson2-databind-java"},
	{"jackson-core.jar", "libjackson2-core-java"},
	{"jackson-annotations.jar", "libjackson2-annotations-java"},
	{"zookeeper.jar", "libzookeeper-java"},
	{"zookeeper-jute.jar", "libzookeeper-java"},
	{"guava.jar", "libguava-java"},
	{"slf4j-api.jar", "libslf4j-java"},
}

// debianOptional is added when present, so Curator's and ZooKeeper's warnings
// reach the program's stderr (shown when a test fails).
const debianOptional = "slf4j-simple.jar"

// Install is a JDK plus the class path of Apache Curator.
type Install struct {
	// Java is the path of the java executable.
	Java string
	// Javac is the path of the javac executable.
	Javac string
	// Classpath lists the jars (or directories) to put on the class path.
	Classpath []string
}

// FindInstall locates java, javac and the Curator jars.
//
// The jars come from $CURATORTEST_CLASSPATH, else from Debian's
// /usr/share/java (curator-recipes, curator-framework, curator-client,
// curator-x-discovery and the Jackson jars it reads and writes JSON with,
// zookeeper, zookeeper-jute, guava, slf4j-api, and slf4j-simple when present).
// java comes from $JAVA_HOME/bin, then PATH; javac from the same directory as
// java, then $JAVA_HOME/bin, then PATH. The error wraps ErrNotInstalled, names
// what is missing and quotes InstallCommand.
func FindInstall() (*Install, error) {
	cp, err := findClasspath()
	if err != nil {
		return nil, err
	}
	java, err := findTool("java", "")
	if err != nil {
		return nil, err
	}
	javac, err := findTool("javac", filepath.Dir(java))
	if err != nil {
		return nil, err
	}
	return &Install{Java: java, Javac: javac, Classpath: cp}, nil
}

func findClasspath() ([]string, error) {
	if v := os.Getenv(EnvClasspath); v != "" {
		var cp, missing []string
		for _, p := range filepath.SplitList(v) {
			if p == "" {
				continue
			}
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, p)
				continue
			}
			cp = append(cp, p)
		}
		if len(missing) > 0 || len(cp) == 0 {
			return nil, fmt.Errorf("%w (%s=%q: missing %s)", ErrNotInstalled, EnvClasspath, v, strings.Join(missing, ", "))
		}
		return cp, nil
	}
	var cp, missing []string
	for _, r := range debianRequired {
		p := filepath.Join(debianDir, r.jar)
		if !fileExists(p) {
			missing = append(missing, p+" (package "+r.pkg+")")
			continue
		}
		cp = append(cp, p)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w (missing %s)", ErrNotInstalled, strings.Join(missing, ", "))
	}
	if p := filepath.Join(debianDir, debianOptional); fileExists(p) {
		cp = append(cp, p)
	}
	return cp, nil
}

// findTool looks for name in dir (when not empty), then $JAVA_HOME/bin, then PATH.
func findTool(name, dir string) (string, error) {
	var dirs []string
	if dir != "" {
		dirs = append(dirs, dir)
	}
	if home := os.Getenv("JAVA_HOME"); home != "" {
		dirs = append(dirs, filepath.Join(home, "bin"))
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w (no %s in JAVA_HOME or PATH)", ErrNotInstalled, name)
	}
	return p, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func (in *Install) classpath(extra ...string) string {
	return strings.Join(append(append([]string(nil), extra...), in.Classpath...), string(os.PathListSeparator))
}
