//! A CPU renderer for the agent-view and wrist cameras: every collider is
//! tessellated once (parry's `to_trimesh`), and each frame is a z-buffered
//! triangle rasteriser with near-plane clipping, back-face culling and flat
//! Lambert shading in per-object colours, written into an `image::RgbImage`.

mod mesh;
mod raster;

pub use mesh::{MeshSet, RenderMesh};
pub use raster::{Camera, Rasterizer};

use nalgebra::{Isometry3, Quaternion, Rotation3, Translation3, UnitQuaternion, Vector3};

use crate::physics::SimWorld;
use crate::robot::RobotModel;
use crate::scene::CameraPose;

/// Camera settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraConfig {
    /// Image width (default: 128).
    pub width: u32,
    /// Image height (default: 128).
    pub height: u32,
    /// Render images at all (default: true); when false observations carry 0×0 images.
    pub enabled: bool,
}

impl Default for CameraConfig {
    fn default() -> Self {
        CameraConfig {
            width: 128,
            height: 128,
            enabled: true,
        }
    }
}

/// The agent-view camera of a layout as a [`Camera`].
pub fn agent_camera(pose: &CameraPose) -> Camera {
    let q = pose.quat_wxyz;
    let rot = UnitQuaternion::new_normalize(Quaternion::new(q[0], q[1], q[2], q[3]));
    Camera {
        pose: Isometry3::from_parts(
            Translation3::new(pose.pos[0], pose.pos[1], pose.pos[2]),
            rot,
        ),
        fovy_deg: pose.fovy_deg,
    }
}

/// The wrist camera: on the configured link, looking along the link's +z with +x up.
pub fn wrist_camera(world: &SimWorld, robot: &RobotModel) -> Camera {
    let mount = &robot.spec.wrist_camera;
    let link = world.body_pose(world.robot.camera_body);
    // Camera axes in the link frame: x = link y, y = link x, z (backwards) = -link z.
    let m = nalgebra::Matrix3::new(0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, -1.0);
    let rot = UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(m));
    let offset = Isometry3::from_parts(Translation3::from(Vector3::from(mount.pos)), rot);
    Camera {
        pose: link * offset,
        fovy_deg: mount.fovy_deg,
    }
}

/// Writes frames as an animated GIF (`delay_ms` per frame, looping).
pub fn save_gif(
    frames: &[image::RgbImage],
    delay_ms: u32,
    path: &std::path::Path,
) -> crate::Result<()> {
    use image::codecs::gif::{GifEncoder, Repeat};
    let err = |message: String| crate::SimError::Image {
        path: path.to_path_buf(),
        message,
    };
    let tmp = path.with_extension("gif.tmp");
    let file = std::fs::File::create(&tmp).map_err(|source| crate::SimError::Io {
        path: tmp.clone(),
        source,
    })?;
    let mut enc = GifEncoder::new_with_speed(std::io::BufWriter::new(file), 10);
    enc.set_repeat(Repeat::Infinite)
        .map_err(|e| err(e.to_string()))?;
    for f in frames {
        let rgba = image::DynamicImage::ImageRgb8(f.clone()).to_rgba8();
        let frame =
            image::Frame::from_parts(rgba, 0, 0, image::Delay::from_numer_denom_ms(delay_ms, 1));
        enc.encode_frame(frame).map_err(|e| err(e.to_string()))?;
    }
    drop(enc);
    std::fs::rename(&tmp, path).map_err(|source| crate::SimError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Places two images side by side.
pub fn side_by_side(a: &image::RgbImage, b: &image::RgbImage) -> image::RgbImage {
    let mut out = image::RgbImage::new(a.width() + b.width(), a.height().max(b.height()));
    image::imageops::replace(&mut out, a, 0, 0);
    image::imageops::replace(&mut out, b, a.width() as i64, 0);
    out
}
