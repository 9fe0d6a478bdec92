//! Tessellation of rapier colliders into body-frame triangle meshes with face normals.

use std::sync::Arc;

use rapier3d::parry::shape::TypedShape;
use rapier3d::prelude::*;

use crate::physics::SimWorld;

/// One collider as triangles in its body's frame.
#[derive(Debug, Clone)]
pub struct RenderMesh {
    /// The body it moves with.
    pub body: RigidBodyHandle,
    /// Vertices in the body frame.
    pub vertices: Vec<[f32; 3]>,
    /// Triangles (counter-clockwise seen from outside).
    pub triangles: Vec<[u32; 3]>,
    /// Colour.
    pub color: [u8; 3],
}

/// All meshes of a world (shared by clones of it).
#[derive(Debug, Clone)]
pub struct MeshSet {
    /// The meshes.
    pub meshes: Arc<Vec<RenderMesh>>,
}

impl MeshSet {
    /// Tessellates every collider of `world`.
    pub fn build(world: &SimWorld) -> MeshSet {
        let mut meshes = Vec::new();
        for info in &world.colliders {
            let Some(c) = world.world.colliders.get(info.handle) else {
                continue;
            };
            let (verts, tris) = match c.shape().as_typed_shape() {
                TypedShape::Cuboid(s) => s.to_trimesh(),
                TypedShape::Cylinder(s) => s.to_trimesh(14),
                TypedShape::Capsule(s) => s.to_trimesh(12, 6),
                TypedShape::Ball(s) => s.to_trimesh(12, 8),
                _ => continue,
            };
            let local = c.position_wrt_parent().copied().unwrap_or(Pose::IDENTITY);
            let vertices = verts
                .iter()
                .map(|v| {
                    let p = local.transform_point(Vector::new(v.x, v.y, v.z));
                    [p.x, p.y, p.z]
                })
                .collect();
            meshes.push(RenderMesh {
                body: info.body,
                vertices,
                triangles: tris,
                color: info.color,
            });
        }
        MeshSet {
            meshes: Arc::new(meshes),
        }
    }

    /// Total triangle count.
    pub fn triangle_count(&self) -> usize {
        self.meshes.iter().map(|m| m.triangles.len()).sum()
    }
}
