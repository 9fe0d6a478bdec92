//! Solution plans and their rendering into a Python (scikit-learn) script.
//!
//! A plan is the in-process policy's action: preprocessing × model family ×
//! two hyperparameter levels (0–3 each, "capacity" and "regularisation",
//! read per family as in [`Family::hyperparameters`]). The script it renders
//! reads `train.csv` and `test.csv` from the working folder, fits a
//! scikit-learn pipeline and writes `submission.csv`; every estimator gets
//! `random_state=0`, so a script's score is a function of its text.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::metric::TargetKind;
use crate::task::Task;

/// Feature preprocessing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preprocessing {
    /// Raw features.
    None,
    /// `StandardScaler`.
    Standard,
    /// `MinMaxScaler`.
    MinMax,
    /// `QuantileTransformer` to a normal distribution.
    Quantile,
}

/// Model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Majority class / prior / mean.
    Constant,
    /// Logistic regression (classification), ridge (regression).
    Linear,
    /// k nearest neighbours.
    Knn,
    /// A decision tree.
    Tree,
    /// A random forest.
    Forest,
    /// Extremely randomised trees.
    ExtraTrees,
    /// Histogram gradient boosting.
    Boosting,
    /// Support vector machine with an RBF kernel.
    Svm,
}

impl Preprocessing {
    /// Every option, in action-index order.
    pub const ALL: [Preprocessing; 4] = [
        Preprocessing::None,
        Preprocessing::Standard,
        Preprocessing::MinMax,
        Preprocessing::Quantile,
    ];
}

impl Family {
    /// Every option, in action-index order.
    pub const ALL: [Family; 8] = [
        Family::Constant,
        Family::Linear,
        Family::Knn,
        Family::Tree,
        Family::Forest,
        Family::ExtraTrees,
        Family::Boosting,
        Family::Svm,
    ];

    /// Constructor arguments for levels (`capacity`, `regularisation`) in 0..4.
    pub fn hyperparameters(self, capacity: u8, regularisation: u8, regression: bool) -> String {
        let c = capacity.min(3) as usize;
        let r = regularisation.min(3) as usize;
        match self {
            Family::Constant => String::new(),
            Family::Linear if regression => {
                format!("alpha={}", ["100.0", "10.0", "1.0", "0.01"][c])
            }
            Family::Linear => format!(
                "C={}, max_iter={}",
                ["0.001", "0.03", "1.0", "30.0"][c],
                [20, 100, 500, 2000][r]
            ),
            Family::Knn => format!(
                "n_neighbors={}, weights={:?}, p={}",
                [50, 15, 5, 1][c],
                ["uniform", "distance", "uniform", "distance"][r],
                [2, 2, 1, 1][r]
            ),
            Family::Tree => format!(
                "max_depth={}, min_samples_leaf={}, random_state=0",
                ["2", "4", "8", "None"][c],
                [1, 5, 20, 50][r]
            ),
            Family::Forest | Family::ExtraTrees => format!(
                "n_estimators={}, max_depth={}, random_state=0",
                [10, 50, 100, 200][c],
                ["None", "12", "6", "3"][r]
            ),
            Family::Boosting => format!(
                "max_iter={}, learning_rate={}, random_state=0",
                [20, 50, 100, 200][c],
                ["0.3", "0.1", "0.05", "0.01"][r]
            ),
            Family::Svm => format!(
                "C={}, gamma={}",
                ["0.1", "1.0", "10.0", "100.0"][c],
                ["'scale'", "0.001", "0.01", "0.1"][r]
            ),
        }
    }

    /// (module, class) of the estimator.
    fn estimator(self, regression: bool) -> (&'static str, &'static str) {
        match (self, regression) {
            (Family::Constant, false) => ("sklearn.dummy", "DummyClassifier"),
            (Family::Constant, true) => ("sklearn.dummy", "DummyRegressor"),
            (Family::Linear, false) => ("sklearn.linear_model", "LogisticRegression"),
            (Family::Linear, true) => ("sklearn.linear_model", "Ridge"),
            (Family::Knn, false) => ("sklearn.neighbors", "KNeighborsClassifier"),
            (Family::Knn, true) => ("sklearn.neighbors", "KNeighborsRegressor"),
            (Family::Tree, false) => ("sklearn.tree", "DecisionTreeClassifier"),
            (Family::Tree, true) => ("sklearn.tree", "DecisionTreeRegressor"),
            (Family::Forest, false) => ("sklearn.ensemble", "RandomForestClassifier"),
            (Family::Forest, true) => ("sklearn.ensemble", "RandomForestRegressor"),
            (Family::ExtraTrees, false) => ("sklearn.ensemble", "ExtraTreesClassifier"),
            (Family::ExtraTrees, true) => ("sklearn.ensemble", "ExtraTreesRegressor"),
            (Family::Boosting, false) => ("sklearn.ensemble", "HistGradientBoostingClassifier"),
            (Family::Boosting, true) => ("sklearn.ensemble", "HistGradientBoostingRegressor"),
            (Family::Svm, false) => ("sklearn.svm", "SVC"),
            (Family::Svm, true) => ("sklearn.svm", "SVR"),
        }
    }
}

/// One solution plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Plan {
    /// Feature preprocessing.
    pub preprocessing: Preprocessing,
    /// Model family.
    pub family: Family,
    /// Capacity level, 0..=3.
    pub capacity: u8,
    /// Regularisation level, 0..=3.
    pub regularisation: u8,
}

impl Plan {
    /// Number of preprocessing choices, families and levels: the policy's action heads.
    pub const HEADS: [usize; 4] = [Preprocessing::ALL.len(), Family::ALL.len(), 4, 4];

    /// A plan from action indices (one per head; out-of-range indices clamp).
    pub fn from_indices(i: [usize; 4]) -> Self {
        Self {
            preprocessing: Preprocessing::ALL[i[0].min(3)],
            family: Family::ALL[i[1].min(7)],
            capacity: i[2].min(3) as u8,
            regularisation: i[3].min(3) as u8,
        }
    }

    /// The action indices of this plan.
    pub fn indices(&self) -> [usize; 4] {
        [
            Preprocessing::ALL
                .iter()
                .position(|p| *p == self.preprocessing)
                .expect("listed"),
            Family::ALL
                .iter()
                .position(|f| *f == self.family)
                .expect("listed"),
            self.capacity as usize,
            self.regularisation as usize,
        ]
    }

    /// Renders the plan as a complete `solution.py` for `task`.
    pub fn render(&self, task: &Task) -> String {
        let kind = task.metric.target_kind();
        let regression = kind == TargetKind::Value;
        let probability = kind == TargetKind::Probability;
        let (module, class) = self.family.estimator(regression);
        let mut args = self
            .family
            .hyperparameters(self.capacity, self.regularisation, regression);
        if self.family == Family::Constant && !regression {
            args = format!(
                "strategy={:?}",
                if probability {
                    "prior"
                } else {
                    "most_frequent"
                }
            );
        }
        let (pre_import, pre_step) = match self.preprocessing {
            Preprocessing::None => (String::new(), String::new()),
            Preprocessing::Standard => ("from sklearn.preprocessing import StandardScaler\n".into(), "StandardScaler(), ".into()),
            Preprocessing::MinMax => ("from sklearn.preprocessing import MinMaxScaler\n".into(), "MinMaxScaler(), ".into()),
            Preprocessing::Quantile => (
                "from sklearn.preprocessing import QuantileTransformer\n".into(),
                "QuantileTransformer(n_quantiles=100, output_distribution='normal', random_state=0), ".into(),
            ),
        };
        let id = &task.spec.id_column;
        let target = &task.spec.target_column;
        let y_convert = if regression {
            "y = np.array([float(r[target_col]) for r in rows])"
        } else {
            "y = np.array([r[target_col] for r in rows])"
        };
        let predict = if probability {
            let positive = task
                .spec
                .classes
                .get(1)
                .cloned()
                .unwrap_or_else(|| "1".into());
            format!(
                "positive = {positive:?}\n\
                 if hasattr(model, 'predict_proba'):\n    \
                     column = list(model.classes_).index(positive)\n    \
                     pred = model.predict_proba(Xt)[:, column]\n\
                 else:\n    \
                     margin = model.decision_function(Xt)\n    \
                     sign = 1.0 if list(model.classes_).index(positive) == 1 else -1.0\n    \
                     pred = 1.0 / (1.0 + np.exp(-sign * margin))\n\
                 pred = [repr(float(p)) for p in pred]"
            )
        } else if regression {
            "pred = [repr(float(p)) for p in model.predict(Xt)]".to_string()
        } else {
            "pred = [str(p) for p in model.predict(Xt)]".to_string()
        };
        format!(
            "# WMRL plan: {self}\n\
             import csv\n\
             import numpy as np\n\
             from sklearn.pipeline import make_pipeline\n\
             {pre_import}from {module} import {class}\n\
             \n\
             def load(path):\n    \
                 with open(path, newline='') as f:\n        \
                     rows = list(csv.reader(f))\n    \
                 return rows[0], rows[1:]\n\
             \n\
             header, rows = load('train.csv')\n\
             id_col, target_col = header.index({id:?}), header.index({target:?})\n\
             features = [i for i in range(len(header)) if i not in (id_col, target_col)]\n\
             X = np.array([[float(r[i]) for i in features] for r in rows])\n\
             {y_convert}\n\
             test_header, test_rows = load('test.csv')\n\
             test_id = test_header.index({id:?})\n\
             names = [header[i] for i in features]\n\
             Xt = np.array([[float(r[test_header.index(n)]) for n in names] for r in test_rows])\n\
             \n\
             model = make_pipeline({pre_step}{class}({args}))\n\
             model.fit(X, y)\n\
             {predict}\n\
             \n\
             with open('submission.csv', 'w', newline='') as f:\n    \
                 out = csv.writer(f)\n    \
                 out.writerow([{id:?}, {target:?}])\n    \
                 for r, p in zip(test_rows, pred):\n        \
                     out.writerow([r[test_id], p])\n"
        )
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |v: &dyn fmt::Debug| format!("{v:?}").to_lowercase();
        write!(
            f,
            "preprocessing={} family={} capacity={} regularisation={}",
            name(&self.preprocessing),
            name(&self.family),
            self.capacity,
            self.regularisation
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_round_trip() {
        for p in 0..4 {
            for f in 0..8 {
                let plan = Plan::from_indices([p, f, 2, 1]);
                assert_eq!(plan.indices(), [p, f, 2, 1]);
            }
        }
    }
}
