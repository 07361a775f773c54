import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.zip.GZIPInputStream;
import java.io.FileInputStream;

import moa.classifiers.core.driftdetection.ADWINChangeDetector;
import moa.classifiers.core.driftdetection.ChangeDetector;
import moa.classifiers.core.driftdetection.DDM;
import moa.classifiers.core.driftdetection.EDDM;
import moa.classifiers.core.driftdetection.HDDM_A_Test;
import moa.classifiers.core.driftdetection.PageHinkleyDM;

/**
 * Runs MOA's change detectors, at their default options, on every sequence
 * of sequences.txt.gz and prints, per sequence and detector, the 0-based
 * indices of the values after which the detector reported a change:
 * "name detector i1 i2 ...". See run.sh.
 */
public class Alarms {
  static ChangeDetector build(String name) {
    switch (name) {
      case "adwin": return new ADWINChangeDetector();
      case "ddm": return new DDM();
      case "eddm": return new EDDM();
      case "page-hinkley": return new PageHinkleyDM();
      case "hddm-a": return new HDDM_A_Test();
    }
    throw new IllegalArgumentException(name);
  }

  public static void main(String[] args) throws Exception {
    String[] detectors = {"adwin", "ddm", "eddm", "hddm-a", "page-hinkley"};
    BufferedReader in = new BufferedReader(new InputStreamReader(new GZIPInputStream(new FileInputStream(args[0]))));
    String line;
    while ((line = in.readLine()) != null) {
      String[] parts = line.trim().split(" ");
      double[] xs = new double[parts.length - 1];
      for (int i = 1; i < parts.length; i++) {
        xs[i - 1] = Double.parseDouble(parts[i]);
      }
      for (String det : detectors) {
        ChangeDetector d = build(det);
        d.prepareForUse();
        StringBuilder out = new StringBuilder(parts[0]).append(' ').append(det);
        for (int i = 0; i < xs.length; i++) {
          d.input(xs[i]);
          if (d.getChange()) {
            out.append(' ').append(i);
          }
        }
        System.out.println(out);
      }
    }
  }
}
